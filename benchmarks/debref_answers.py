"""Extractive answers over the Debian Reference, per language, with the shipped
defaults: does the answer cite the section its question is about?

The pages are those of :mod:`debref_beir` (the 20 target sections and 60 others, the
same numbers in every translation), each written as a Markdown file ``<number>.md``
(the section's title as its heading) and ingested as a user would ingest a folder:
``Ragline(Settings(index_dir=…)).ingest(folder)`` with nothing pinned, so the
embedder is the automatic choice and the judge the default. Each question of the
language is asked once; an answer counts when it is not the fallback and cites the
target section. Misses are listed with what was cited or the fallback's reason.

    python benchmarks/debref_answers.py --langs de,es,fr,pt,en --work /tmp/dra \
        --out benchmarks/results/languages_debref_answers.md

Indexes are kept under ``--work`` and reused (delete the folder to rebuild).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchlib import emit, load_jsonl
from debref_beir import DOCS, LANGS, QUESTIONS, pick, sections
from machine import command_line, load_average, machine_lines
from ragline.engine import Ragline
from ragline.settings import Settings


def write_pages(docs: Path, lang: str, folder: Path, n_distractors: int) -> int:
    targets = {q["target"] for q in load_jsonl(QUESTIONS)}
    chosen = pick(sections(docs, "en"), targets, n_distractors)
    book = sections(docs, lang)
    folder.mkdir(parents=True, exist_ok=True)
    for num in chosen:
        title, body = book[num]
        (folder / f"{num}.md").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    return len(chosen)


def run_language(args: argparse.Namespace, lang: str) -> dict[str, object]:
    work = args.work / lang
    pages = write_pages(args.docs, lang, work / "pages", args.distractors)
    rag = Ragline(Settings(index_dir=work / "index"))
    started = time.perf_counter()
    report = rag.ingest(work / "pages")
    ingest_s = time.perf_counter() - started
    questions = [q for q in load_jsonl(QUESTIONS) if q["lang"] == lang]
    right, fallbacks = 0, 0
    misses: list[str] = []
    ms: list[float] = []
    for q in questions:
        t0 = time.perf_counter()
        a = rag.ask(q["question"])
        ms.append((time.perf_counter() - t0) * 1e3)
        cited = sorted({Path(c.source).stem for c in a.citations})
        ok = not a.fallback and q["target"] in cited
        right += ok
        fallbacks += a.fallback
        if not ok:
            why = f"fallback: {a.confidence.reason}" if a.fallback else f"cited {', '.join(cited)}"
            misses.append(f"{q['id']} (target {q['target']}): {why}")
    chunks = rag.store.info().chunks
    rag.close()
    ms.sort()
    return {
        "lang": lang,
        "pages": pages,
        "chunks": chunks,
        "model": report.model,
        "ingest_s": ingest_s,
        "right": right,
        "fallbacks": fallbacks,
        "n": len(questions),
        "p50_ms": ms[len(ms) // 2] if ms else 0.0,
        "misses": misses,
    }


def misses_of(row: dict[str, object]) -> list[str]:
    misses = row["misses"]
    return [str(m) for m in misses] if isinstance(misses, list) else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=Path, default=DOCS, help="the book's HTML folder")
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--distractors", type=int, default=60)
    ap.add_argument("--work", type=Path, default=Path("/tmp/debref-answers"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    loads = [load_average()[0]]
    rows = []
    for lang in [x for x in args.langs.split(",") if x]:
        if lang not in LANGS:
            raise SystemExit(f"--langs: no questions in {lang!r} (have {', '.join(LANGS)})")
        rows.append(run_language(args, lang))
        loads.append(load_average()[0])
    lines = ["# Answers over the Debian Reference per language (issue 29)", ""]
    lines += machine_lines(loads)
    lines += [
        f"- command: `{command_line()}`",
        f"- data: the Debian Reference (GPL-2+, `/usr/share/doc/debian-reference-common/docs`), "
        f"{rows[0]['pages'] if rows else 0} sections per language as Markdown files; "
        "questions `benchmarks/data/debref_questions.jsonl`",
        "- settings: the shipped defaults (automatic embedder, default judge, extractive answers)",
        "",
        "| language | model (automatic) | chunks | cite the target section | fallbacks "
        "| answer p50 ms | ingest s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['lang']} | {r['model']} | {r['chunks']} | {r['right']}/{r['n']} "
            f"| {r['fallbacks']} | {r['p50_ms']:.0f} | {r['ingest_s']:.0f} |"
        )
    lines += ["", "Misses:", ""]
    for r in rows:
        lines += [f"- {m}" for m in misses_of(r)]
    emit("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
