"""Does graph expansion make better answers? d2l-en, the answers benchmark's questions.

Same data, pass rule and extractive generator as ``benchmarks/answers.py`` (an
in-scope answer passes when a citation names a chunk of an expected section; an
out-of-scope one when it is the fallback), run once per expansion setting on one
index: none (the shipped default), neighbours ±1, the hit's section, both. The
context budget (``max_context_tokens``) and expansion budget are the shipped ones.
The rule fixed before the first run: the default stays off unless an expansion passes
more questions on both splits (results/expansion.md says how it came out).

Run: python benchmarks/expansion.py [--index DIR] [--d2l ../shared/data/d2l-en]
Writes benchmarks/results/expansion.md (and prints it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from benchlib import SHARED, load_jsonl, load_module
from ragline.engine import Ragline
from ragline.settings import Settings

REPO = Path(__file__).resolve().parents[1]


CONFIGS = {
    "none (default)": {"expand_neighbours": 0, "expand_section": False},
    "neighbours ±1": {"expand_neighbours": 1, "expand_section": False},
    "section": {"expand_neighbours": 0, "expand_section": True},
    "neighbours ±1 + section": {"expand_neighbours": 1, "expand_section": True},
}


def main() -> None:
    bench = load_module("bench_answers", REPO / "benchmarks/answers.py")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "ragline-bench-d2l")
    ap.add_argument("--d2l", type=Path, default=SHARED / "d2l-en")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/expansion.md")
    args = ap.parse_args()
    load = os.getloadavg()
    questions = load_jsonl(REPO / "benchmarks/data/d2l_questions.jsonl")
    oos = load_jsonl(REPO / "benchmarks/data/out_of_scope.jsonl")
    rag = Ragline(Settings(index_dir=args.index))
    t0 = time.perf_counter()
    report = rag.ingest(args.d2l)
    ingest_s = time.perf_counter() - t0
    chunks = rag.store.info(None).chunks
    rag.close()

    rows = []
    for name, overrides in CONFIGS.items():
        rag = Ragline(Settings(index_dir=args.index, **overrides))
        passed = {"train": 0, "dev": 0}
        total = {"train": 0, "dev": 0}
        refused = 0
        context: list[int] = []
        ms: list[float] = []
        for q in questions:
            a = rag.ask(q["question"])
            total[q["split"]] += 1
            passed[q["split"]] += any(
                bench.in_expected(c.source, c.section, q["expected"]) for c in a.citations
            )
            context.append(sum(len(s.chunk_ids) for s in a.sources))
            ms.append(a.timings_ms["total"])
        for q in oos:
            refused += rag.ask(q["question"]).fallback
        rag.close()
        rows.append(
            f"| {name} | {bench.pct(passed['train'], total['train'])} "
            f"| {bench.pct(passed['dev'], total['dev'])} | {bench.pct(refused, len(oos))} "
            f"| {statistics.mean(context):.1f} | {statistics.median(ms):.0f} |"
        )
    lines = [
        "# Graph expansion on d2l-en: answers with and without it",
        "",
        f"Produced by `python benchmarks/expansion.py` ({time.strftime('%Y-%m-%d')}; "
        f"{platform.machine()}, {os.cpu_count()} cores; load average {load[0]:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at the end: a shared, loaded machine, so latencies are "
        f"only comparable within this table). Index: d2l-en, {report.files} files, {chunks} "
        f"chunks (ingest {ingest_s:.0f} s). Questions and pass rule: benchmarks/answers.py; "
        "extractive generator; shipped budgets.",
        "",
        "| expansion | in-scope train pass | in-scope dev pass | out-of-scope fallback "
        "| context chunks (mean) | ask p50 ms |",
        "|---|---|---|---|---:|---:|",
        *rows,
        "",
    ]
    text = "\n".join(lines)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
