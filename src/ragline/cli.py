"""The `ragline` command line: ingest, search, reindex, status."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated, Any, cast, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from ragline.answer.answerer import SearchOptions
from ragline.engine import Ragline, parse_filter
from ragline.eval.cli import eval_command
from ragline.ingest.report import IngestReport
from ragline.retrieve.retriever import SearchMode
from ragline.serve.cli import serve as serve_command
from ragline.serve.keys_cli import keys_app
from ragline.settings import ChunkerName, GeneratorName, Settings
from ragline.store.base import StoreError
from ragline.types import Answer, SearchResult

app = typer.Typer(
    help="ragline: grounded, cited answers over a folder of documents.",
    no_args_is_help=True,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)

IndexOpt = Annotated[
    Path | None,
    typer.Option("--index", help="Index folder (default: $RAGLINE_INDEX_DIR or ./.ragline)."),
]
TenantOpt = Annotated[
    str | None, typer.Option("--tenant", help="Tenant (default: $RAGLINE_TENANT or 'default').")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ModeOpt = Annotated[str | None, typer.Option("--mode", help="bm25, vector or hybrid (default).")]
FilterOpt = Annotated[
    list[str] | None,
    typer.Option("--filter", help="key=value on chunk metadata; repeatable."),
]
ExpandOpt = Annotated[
    int | None, typer.Option("--expand", help="Neighbour chunks to add around each hit.")
]


def _engine(index: Path | None, **overrides: Any) -> Ragline:
    update = {k: v for k, v in overrides.items() if v is not None}
    if index is not None:
        update["index_dir"] = index
    try:
        settings = Settings(**update)
    except ValidationError as e:
        first = e.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "settings"
        err.print(f"[red]error:[/] invalid setting {field}: {first['msg']}")
        raise typer.Exit(2) from None
    return Ragline(settings)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]error:[/] {message}")
    return typer.Exit(code)


def _search_options(
    mode: str | None, filters: list[str] | None, top_k: int | None, expand: int | None
) -> SearchOptions:
    """The retrieval options `search` and `ask` share, checked: a bad one exits with 2."""
    if mode is not None and mode not in get_args(SearchMode):
        raise _fail(f"--mode must be bm25, vector or hybrid, not {mode!r}")
    try:
        parsed = dict(parse_filter(f) for f in filters or [])
    except ValueError as e:
        raise _fail(str(e)) from None
    return SearchOptions(
        mode=cast("SearchMode | None", mode), top_k=top_k, filters=parsed, expand=expand
    )


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A folder (or one file) of documents.")],
    tenant: TenantOpt = None,
    chunker: Annotated[
        str | None, typer.Option("--chunker", help="section (default) or recursive.")
    ] = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Index new and changed files, skip unchanged ones, drop deleted ones.

    Exit status: 0 when every file indexed, 1 when some failed (the others and
    the existing index are kept), 2 on a usage or store error.
    """
    if chunker not in (None, "section", "recursive"):
        raise _fail(f"--chunker must be 'section' or 'recursive', not {chunker!r}")
    if not path.exists():
        raise _fail(f"{path}: no such file or folder")
    rag = _engine(index, tenant=tenant)
    chunker_name: ChunkerName | None = chunker  # type: ignore[assignment]
    try:
        with Progress(
            TextColumn("[bold]ingest[/]"),
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[file]}", style="dim"),
            console=err,
            transient=True,
            disable=as_json or not err.is_terminal,
        ) as bar:
            task = bar.add_task("ingest", total=None, file="")

            def progress(done: int, total: int, current: str) -> None:
                bar.update(task, completed=done, total=total, file=current[-50:])

            report = rag.ingest(path, tenant=tenant, chunker=chunker_name, progress=progress)
    except (StoreError, FileNotFoundError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_report(report, rag.reports_dir / "last-ingest.json")
    if report.failed:
        raise typer.Exit(1)


def _print_report(r: IngestReport, saved: Path) -> None:
    t = Table(title=f"ingest {r.root}  (tenant {r.tenant}, {r.chunker} chunker, {r.model})")
    t.add_column("files", justify="right")
    t.add_column("indexed", justify="right")
    t.add_column("skipped", justify="right")
    t.add_column("deleted", justify="right")
    t.add_column("failed", justify="right")
    t.add_column("chunks written", justify="right")
    t.add_column("embedded", justify="right")
    t.add_column("tokens", justify="right")
    t.add_column("index chunks", justify="right")
    t.add_column("seconds", justify="right")
    t.add_row(
        str(r.files),
        str(len(r.indexed)),
        str(len(r.skipped)),
        str(len(r.deleted)),
        f"[red]{len(r.failed)}[/]" if r.failed else "0",
        str(r.chunks),
        str(r.chunks_embedded),
        f"{r.tokens:,}",
        str(r.index_chunks),
        f"{r.seconds:.2f}",
    )
    out.print(t)
    if r.per_chapter:
        c = Table(title="per chapter")
        for col in ("chapter", "files", "chunks", "tokens"):
            c.add_column(col, justify="left" if col == "chapter" else "right")
        for name, cc in sorted(r.per_chapter.items()):
            c.add_row(name or "(top level)", str(cc.files), str(cc.chunks), f"{cc.tokens:,}")
        out.print(c)
    for f in r.failed:
        err.print(f"[red]failed[/] {f}")
    stages = ", ".join(f"{k} {v:.2f}s" for k, v in r.stage_seconds.items())
    out.print(f"[dim]stages: {stages}; report saved to {saved}[/]")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    mode: ModeOpt = None,
    filters: FilterOpt = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Hits to return.")] = None,
    expand: ExpandOpt = None,
    tenant: TenantOpt = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ranked chunks for a query (BM25, vector or fused hybrid)."""
    options = _search_options(mode, filters, top_k, expand)
    rag = _engine(index, tenant=tenant)
    try:
        result = rag.search(query, **options)
    except (StoreError, ValueError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_hits(result)


def _print_hits(result: SearchResult) -> None:
    if not result.hits:
        out.print("[yellow]no results[/]")
    for h in result.hits:
        c = h.chunk
        where = " > ".join([c.title, *[p for p in c.heading_path if p != c.title]])
        extra = f"  (neighbour of {h.expanded_from[:8]})" if h.expanded_from else ""
        lang = c.metadata.get("language")
        extra += f"  language {lang}" if lang else ""
        out.print(
            f"[bold cyan]{h.rank:>2}.[/] [bold]{where}[/]  [dim]score {h.score:.4f}{extra}[/]",
            highlight=False,
        )
        out.print(f"    [dim]{c.url}[/]")
        snippet = " ".join(c.text.split())
        out.print(f"    {snippet[:240]}{'…' if len(snippet) > 240 else ''}", highlight=False)
    timings = ", ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items())
    lang = f"; query language {result.language}" if result.language else ""
    out.print(f"[dim]{result.mode}: {timings}{lang}[/]")


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    mode: ModeOpt = None,
    filters: FilterOpt = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Chunks to retrieve.")] = None,
    expand: ExpandOpt = None,
    generator: Annotated[
        str | None, typer.Option("--generator", help="extractive (default), openai or local.")
    ] = None,
    selected_text: Annotated[
        str | None, typer.Option("--selected-text", help="Text the question is about.")
    ] = None,
    tenant: TenantOpt = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    history_file: Annotated[
        Path | None,
        typer.Option(
            "--history",
            help="JSON file of the conversation so far: [{role: user|assistant, content}]; "
            "a follow-up is made self-contained from it before searching.",
        ),
    ] = None,
) -> None:
    """Answer a question from the index, citing the passages used.

    Streams the answer, then lists its sources. Exit status: 0 on an answer (or
    the "not enough information" fallback), 1 when generation failed midway
    (the partial answer is shown), 2 on a usage or store error.
    """
    options = _search_options(mode, filters, top_k, expand)
    if generator not in (None, *get_args(GeneratorName)):
        names = ", ".join(get_args(GeneratorName))
        raise _fail(f"--generator must be one of {names}, not {generator!r}")
    history = _read_history(history_file) if history_file else None
    rag = _engine(index, tenant=tenant, generator=generator)
    answer: Answer | None = None
    streamed = False
    try:
        events = rag.ask_stream(question, history=history, selected_text=selected_text, **options)
        for event in events:
            if event.type == "token" and not as_json:
                out.print(event.text, end="", markup=False, highlight=False, soft_wrap=True)
                streamed = True
            elif event.type == "error" and not as_json:
                if streamed:
                    out.print()
                err.print(f"[red]error:[/] {event.error} (the answer above is incomplete)")
            elif event.type == "done":
                answer = event.answer
    except (StoreError, ValueError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    assert answer is not None
    if as_json:
        print(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False))
    else:
        out.print()
        _print_answer_details(answer)
    if not answer.complete:
        raise typer.Exit(1)


def _read_history(path: Path) -> list[dict[str, Any]]:
    """The ``--history`` file: a JSON list of messages (checked again by the answerer)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(f"--history {path}: {e}") from None
    if not isinstance(data, list):
        raise _fail(f"--history {path}: expected a JSON list of {{role, content}} messages")
    return data


def _print_answer_details(answer: Answer) -> None:
    if answer.query_rewrite != "none":
        searched = escape(answer.search_query)
        out.print(f"[dim]searched ({answer.query_rewrite}): {searched}[/]", highlight=False)
    conf = answer.confidence
    colour = {"high": "green", "medium": "yellow"}.get(conf.level, "red")
    out.print(
        f"[dim]confidence:[/] [{colour}]{conf.level}[/] [dim]({conf.score:.2f}; {conf.reason})[/]"
    )
    if answer.sources:
        # One line per source, soft-wrapped: a table folds long paths mid-word
        # when the output is narrow or piped, which breaks copy-paste and grep.
        cited = {c.number for c in answer.citations}
        out.print("[bold]sources[/]")
        for src in answer.sources:
            style = "bold" if src.number in cited else "dim"
            num = f"[{style}]\\[{src.number}][/]"
            out.print(
                f"  {num} {escape(src.label)}  [dim]{escape(src.hit.chunk.source)}"
                f"  {src.hit.score:.4f}[/]",
                soft_wrap=True,
                highlight=False,
            )
    unsupported = [c for c in answer.citations if not c.supported]
    for c in unsupported:
        out.print(f"[yellow]unsupported citation[/] \\[{c.number}] for: {escape(c.claim[:120])}")
    if answer.dropped_citations:
        dropped = escape(", ".join(answer.dropped_citations))
        out.print(f"[yellow]removed citations of sources not in the context:[/] {dropped}")
    for topic in answer.suggestions:
        out.print(f"  • {escape(topic)}", highlight=False)
    timings = ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items() if "." not in k)
    model = answer.model or answer.generator
    out.print(f"[dim]{model}: {timings}[/]")


@app.command()
def reindex(index: IndexOpt = None) -> None:
    """Re-embed every stored chunk with the configured model (no re-parsing)."""
    rag = _engine(index)
    try:
        n = rag.reindex()
    except StoreError as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    out.print(f"re-embedded {n} chunks with {rag.embedder.fingerprint.name}")


@app.command()
def status(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """What the index holds and which model built it."""
    rag = _engine(index)
    try:
        info = rag.status()
    finally:
        rag.close()
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for k, v in info.items():
        out.print(f"[bold]{k}[/]: {v}")


@app.command()
def migrate(
    to: Annotated[
        str,
        typer.Option(
            "--to", help="Target store: postgres://…, qdrant://…, qdrant+local://PATH or a folder."
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace what the target already holds.")
    ] = False,
    sample: Annotated[
        int, typer.Option("--sample", help="Chunks whose searches are compared.")
    ] = 20,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the index (STORE_URL, default the embedded one) to another store and verify
    the copy: counts per tenant and a sample of vector and BM25 searches.

    Exit status: 0 when verified, 1 when the copy differs, 2 on a usage or store error.
    """
    from ragline.store.migrate import migrate_to_url

    settings = _engine(index).settings
    try:
        report = migrate_to_url(settings, to, force=force, sample=max(0, sample))
    except StoreError as e:
        raise _fail(str(e)) from None
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        agreeing = sum(s.agrees for s in report.searches)
        out.print(
            f"migrated {report.documents} documents, {report.chunks} chunks "
            f"from {escape(report.source)} to {escape(report.target)} in {report.seconds:.1f} s; "
            f"{agreeing}/{len(report.searches)} sampled searches agree"
        )
        for problem in report.problems:
            err.print(f"[red]problem:[/] {escape(problem)}")
    if not report.ok:
        raise typer.Exit(1)


app.add_typer(keys_app, name="keys")
app.command("serve")(serve_command)
app.command("eval")(eval_command)


@app.command()
def bench(
    path: Annotated[
        Path | None,
        typer.Argument(help="Folder to ingest (default: the folder the index was built from)."),
    ] = None,
    scale: Annotated[
        str, typer.Option("--scale", help="Synthetic index sizes, e.g. 10k,100k,1m.")
    ] = "10k,100k",
    modes: Annotated[str, typer.Option("--modes", help="Search modes to time.")] = (
        "bm25,vector,hybrid"
    ),
    queries: Annotated[int, typer.Option("--queries", help="Measured queries per mode.")] = 200,
    warmup: Annotated[int, typer.Option("--warmup", help="Unmeasured queries first.")] = 20,
    queries_file: Annotated[
        Path | None,
        typer.Option(
            "--queries-file",
            help="queries.jsonl or one query per line (default: "
            "pseudo-queries cut from the chunks).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic corpus.")] = 7,
    work_dir: Annotated[
        Path | None, typer.Option("--work-dir", help="Where the temporary indexes go.")
    ] = None,
    report_out: Annotated[
        Path | None, typer.Option("--out", help="Write a Markdown report here.")
    ] = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingestion throughput, search latency at scale, peak memory and index size."""
    from ragline.eval.bench import (
        BenchConfig,
        BenchReport,
        parse_modes,
        parse_scales,
        rich_tables,
        run_bench,
    )

    command = "ragline " + " ".join(sys.argv[1:])

    try:
        config = BenchConfig(
            path=path,
            scales=tuple(parse_scales(scale)),
            modes=tuple(parse_modes(modes)),
            queries=queries,
            warmup=warmup,
            queries_file=queries_file,
            seed=seed,
            work_dir=work_dir,
        )
    except ValueError as e:
        raise _fail(str(e)) from None
    rag = _engine(index)
    # A kill still unwinds, so the (possibly GBs of) temporary indexes are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with err.status("bench", spinner="dots") as spinner:

            def log(msg: str) -> None:  # a spinner on a terminal, else one line per step
                if err.is_terminal:
                    spinner.update(f"bench: {msg}")
                else:
                    err.print(f"bench: {msg}", highlight=False, soft_wrap=True)

            def save(partial: BenchReport) -> None:  # finished scales survive a stopped run
                if report_out is not None:
                    report_out.parent.mkdir(parents=True, exist_ok=True)
                    report_out.write_text(partial.to_markdown(command), "utf-8")

            report = run_bench(rag.settings, config, rag.embedder, log, save)
    except (StoreError, ValueError, FileNotFoundError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    save(report)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return
    for table in rich_tables(report):
        out.print(table)
    out.print(f"[dim]synthetic chunks: {report.data['how']}[/]")


def main() -> None:  # pragma: no cover - console entry for `python -m ragline`
    sys.exit(app())
