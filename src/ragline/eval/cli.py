"""`ragline eval`: retrieval quality on a BEIR-layout folder, or citation quality on claims.

Registered on the main Typer app in :mod:`ragline.cli`; the work itself lives in
the other modules of :mod:`ragline.eval`, this one only parses options, shows
progress and prints or writes the results.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

# The work's modules are imported when `eval` runs: `ragline --help` stays light.
if TYPE_CHECKING:
    from rich.progress import Progress

    from ragline.eval.answers import AnswersReport, ClaimsData
    from ragline.eval.beir import BeirDataset, BeirDocument
    from ragline.eval.index import EvalIndex
    from ragline.eval.runs import RetrievalReport
    from ragline.settings import Settings

out = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(code)


def _settings(cache_dir: Path | None) -> Settings:
    from pydantic import ValidationError

    from ragline.settings import Settings, invalid_setting

    try:
        s = Settings()
    except ValidationError as e:
        raise _fail(invalid_setting(e)) from None
    if cache_dir is not None:
        s = s.model_copy(update={"eval_cache_dir": cache_dir})
    return s


def _pick_split(root: Path, split: str | None) -> str:
    """``--split``, else the only split the folder has, else ``test`` (BEIR's usual)."""
    if split:
        return split
    found = sorted(p.stem for p in (root / "qrels").glob("*.tsv"))
    return found[0] if len(found) == 1 else "test"


def _progress(enabled: bool) -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not enabled,
    )


def _limited(items: dict[str, str], limit: int | None) -> dict[str, str]:
    if limit is None:
        return items
    return dict(list(items.items())[:limit])


def _open_index(
    bar: Progress,
    corpus: list[BeirDocument],
    corpus_hash: str,
    name: str,
    settings: Settings,
    rebuild: bool,
) -> EvalIndex:
    from ragline.embed.choice import AUTO, choose_backend, installed_choice
    from ragline.embed.factory import make_embedder
    from ragline.eval.index import corpus_languages, open_eval_index

    if settings.embedder == AUTO:  # the model an ingest of this corpus would choose
        languages = corpus_languages(corpus, settings)
        choice = installed_choice(choose_backend(languages, settings.embed_auto_non_english))
        settings = settings.with_embedder(choice.backend)
        err.print(f"[dim]{choice.reason}[/]")
    task = bar.add_task("index", total=len(corpus))

    def on_index(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    index = open_eval_index(
        corpus,
        corpus_hash,
        name,
        settings,
        make_embedder(settings),
        progress=on_index,
        rebuild=rebuild,
    )
    bar.update(task, completed=len(corpus), visible=False)
    return index


def _index_info(index: EvalIndex) -> dict[str, Any]:
    return {
        "key": index.key,
        "tenant": index.tenant,
        "reused": index.reused,
        "seconds": round(index.seconds, 2),
    }


def _run_retrieval(
    dataset: BeirDataset,
    settings: Settings,
    modes: list[str],
    top_k: int,
    limit: int | None,
    rebuild: bool,
    show: bool,
) -> RetrievalReport:
    from ragline.eval.runs import RetrievalReport, default_mode, retrieval_settings, run_retrieval

    started = time.perf_counter()
    queries = _limited(dataset.queries, limit)
    with _progress(show) as bar:
        index = _open_index(
            bar,
            list(dataset.corpus.values()),
            dataset.corpus_hash,
            dataset.root.name,
            settings,
            rebuild,
        )
        try:
            rag = index.rag
            task = bar.add_task("search", total=len(queries) * len(modes))
            done_before: dict[str, int] = {}

            def on_query(done: int, total: int, mode: str) -> None:
                base = sum(v for k, v in done_before.items() if k != mode)
                done_before[mode] = done
                bar.update(task, completed=base + done, description=f"search {mode}")

            results = run_retrieval(
                queries,
                dataset.qrels,
                rag.store,
                rag.embedder,
                rag.settings,
                index.doc_of,
                modes,
                top_k=top_k,
                progress=on_query,
                languages=dataset.languages,
            )
        finally:
            index.close()
    return RetrievalReport(
        dataset=dataset.root.name,
        split=dataset.split,
        queries=len(queries),
        documents=index.documents,
        chunks=index.chunks,
        top_k=top_k,
        model=rag.embedder.fingerprint.name,
        default_mode=default_mode(settings),
        index=_index_info(index),
        settings=retrieval_settings(settings),
        results=results,
        seconds=time.perf_counter() - started,
    )


def _claims_corpus(
    claims_dir: Path, dataset_dir: Path | None, data: ClaimsData
) -> tuple[list[BeirDocument], str, str]:
    """The corpus to index for the claims: DATASET_DIR's corpus.jsonl, else the one
    beside the claims folder (so the retrieval index is reused), else the abstracts."""
    from ragline.eval.beir import DatasetError, load_corpus

    for root in (dataset_dir, claims_dir.parent):
        if root is not None and (root / "corpus.jsonl").is_file():
            docs, digest = load_corpus(root / "corpus.jsonl")
            missing = [d for d in data.sentences if d not in docs]
            if missing:
                raise DatasetError(
                    root / "corpus.jsonl", None, f"document {missing[0]!r} of the claims is missing"
                )
            return list(docs.values()), digest, root.name
    import hashlib

    corpus = data.corpus()
    digest = hashlib.sha256(
        json.dumps([[d.id, d.title, d.text] for d in corpus]).encode()
    ).hexdigest()
    return corpus, digest, claims_dir.name


def _run_answers(
    claims_dir: Path,
    dataset_dir: Path | None,
    split: str,
    settings: Settings,
    limit: int | None,
    out_of_scope: Path | None,
    rebuild: bool,
    show: bool,
) -> AnswersReport:
    from ragline.eval.answers import AnswersReport, load_claims, load_questions
    from ragline.eval.answers_run import run_answers
    from ragline.eval.index import indexed_text
    from ragline.eval.runs import default_mode

    started = time.perf_counter()
    data = load_claims(claims_dir, split)
    questions = load_questions(out_of_scope)
    corpus, digest, name = _claims_corpus(claims_dir, dataset_dir, data)
    claims = data.claims[:limit] if limit is not None else data.claims
    with _progress(show) as bar:
        index = _open_index(bar, corpus, digest, name, settings, rebuild)
        try:
            task = bar.add_task("answer", total=None)

            def on_answer(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, description=f"answer {label}")

            results = run_answers(
                claims,
                data,
                {d.id: indexed_text(d) for d in corpus},
                questions,
                index,
                progress=on_answer,
            )
        finally:
            index.close()
    return AnswersReport(
        claims_dir=str(claims_dir),
        split=split,
        claims=len(claims),
        index=_index_info(index),
        results=results,
        settings={
            "retrieval_mode": default_mode(settings),
            "retrieval_top_k": settings.retrieval_top_k,
            "confidence_min": settings.confidence_min,
            "extractive_max_sentences": settings.extractive_max_sentences,
            "citation_support_threshold": settings.citation_support_threshold,
        },
        seconds=time.perf_counter() - started,
    )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def eval_command(
    dataset_dir: Annotated[
        Path | None,
        typer.Argument(help="BEIR-layout folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv."),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option("--split", help="qrels split (default: the only one there, else test)."),
    ] = None,
    modes: Annotated[
        str | None,
        typer.Option(
            "--modes",
            help="Comma-separated: bm25, vector, hybrid-rrf, hybrid-weighted, rerank "
            "(default: all; rerank when a cross-encoder or the reader is configured).",
        ),
    ] = None,
    top_k: Annotated[
        int, typer.Option("--top-k", min=10, max=1000, help="Documents ranked per query.")
    ] = 100,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Use only the first N queries/claims.")
    ] = None,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers",
            help="Claims folder (claims_<split>.jsonl, corpus_sentences.jsonl): evaluate "
            "cited answers instead of rankings.",
        ),
    ] = None,
    out_of_scope: Annotated[
        Path | None,
        typer.Option(
            "--out-of-scope",
            help="JSON lines with a 'question' each, for the fallback rate "
            "(default: ragline's own 40 general-knowledge questions).",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Eval index cache (default: $RAGLINE_EVAL_CACHE_DIR)."),
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Re-ingest even when a cached index matches.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write a Markdown report here.")
    ] = None,
) -> None:
    """Measure retrieval (nDCG@10, MRR@10, Recall@10/100, P@5, latency) per mode, and
    per language for queries tagged with one, on a BEIR dataset, or, with --answers,
    citation precision/recall and fallback rates."""
    from ragline.eval.beir import DatasetError, load_beir
    from ragline.eval.report import (
        answers_markdown,
        answers_table,
        language_table,
        retrieval_markdown,
        retrieval_table,
    )
    from ragline.eval.runs import parse_modes
    from ragline.store.base import StoreError

    settings = _settings(cache_dir)
    # The command as typed when run as `ragline eval …` (not when called in-process).
    argv = sys.argv[2:] if sys.argv[1:2] == ["eval"] else []
    command = shlex.join(["ragline", "eval", *argv])
    show = err.is_terminal
    render: Callable[[], None]
    try:
        if answers is not None:
            a_split = split or "train"
            a_report = _run_answers(
                answers, dataset_dir, a_split, settings, limit, out_of_scope, rebuild, show
            )
            data: dict[str, Any] = a_report.to_dict()
            markdown = answers_markdown(a_report, command)

            def render() -> None:
                out.print(answers_table(a_report, out.width))
        else:
            if dataset_dir is None:
                raise _fail("give a BEIR dataset folder, or --answers CLAIMS_DIR")
            try:
                chosen = parse_modes(modes, settings)
            except ValueError as e:
                raise _fail(str(e)) from None
            dataset = load_beir(dataset_dir, _pick_split(dataset_dir, split))
            r_report = _run_retrieval(dataset, settings, chosen, top_k, limit, rebuild, show)
            data = r_report.to_dict()
            markdown = retrieval_markdown(r_report, command)

            def render() -> None:
                out.print(retrieval_table(r_report, out.width))
                languages = language_table(r_report, out.width)
                if languages is not None:
                    out.print(languages)
    except DatasetError as e:
        raise _fail(str(e)) from None
    except StoreError as e:
        raise _fail(str(e)) from None
    if report is not None:
        _write(report, markdown)
    if as_json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        render()
        if report is not None:
            out.print(f"[dim]report written to {report}[/]")
