"""The reader's cost per pair, and the extractive answer with each judge.

1. Per pair: a 12-token question with passages of 48, 112 and 240 tokens (d2l-en
   paragraphs cut to length), read 8 at a time as the judge does, ``--rounds`` times
   after a warm-up; the median milliseconds per pair.
2. Whole answers: each in-scope d2l question (benchmarks/data/d2l_questions.jsonl) asked
   with ``judge=reader`` and ``judge=evidence`` alternately on the same index, first ask
   (nothing of the question cached), then a repeat; p50 and p95 of ``ask``.

Run: python benchmarks/reader_latency.py --index DIR [--limit 30]
Writes benchmarks/results/reader_latency.md. ``--pairs-only`` measures part 1 alone and
prints it (the device machine runs it pinned to 2 cores with ``taskset``, no index needed;
``--d2l`` may then point at any folder of Markdown, e.g. ragline's docs/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from ragline.embed.tokenizer import load_tokenizer
from ragline.reader import Reader

REPO = Path(__file__).resolve().parents[1]
QUESTION = "Why does batch normalization allow larger learning rates?"


def passages(d2l: Path, tokens: int, n: int) -> list[str]:
    """``n`` d2l-en paragraphs cut to ``tokens`` tokens."""
    tok = load_tokenizer()
    out: list[str] = []
    for path in sorted(d2l.rglob("*.md")):
        for para in path.read_text(encoding="utf-8").split("\n\n"):
            enc = tok.encode(para, add_special_tokens=False)
            if len(enc.ids) >= tokens and not para.lstrip().startswith(("```", "$$", "|")):
                out.append(para[: enc.offsets[tokens - 1][1]])
                if len(out) == n:
                    return out
    return out


def cpu_name() -> str:
    """The CPU's model name, for the table (Linux)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, default=Path("/tmp/d2l-index"))
    ap.add_argument("--d2l", type=Path, default=REPO.parent / "shared" / "data" / "d2l-en")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/reader_latency.md")
    ap.add_argument("--pairs-only", action="store_true")
    ap.add_argument("--model", type=Path, default=None, help="another reader .onnx to time")
    args = ap.parse_args()
    load0 = os.getloadavg()
    reader = Reader(args.model)
    rows = []
    for n in (48, 112, 240):
        batch = passages(args.d2l, n, 8)
        reader.read(QUESTION, batch)  # warm-up
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            reader.read(QUESTION, batch)
            times.append((time.perf_counter() - t0) * 1000 / len(batch))
        rows.append((n, float(np.median(times)), float(np.percentile(times, 95))))
    if args.pairs_only:
        print(
            json.dumps(
                {
                    "cpu": cpu_name(),
                    "cores": sorted(os.sched_getaffinity(0)),
                    "load": os.getloadavg()[0],
                    "rows": rows,
                }
            )
        )
        return
    from ragline.engine import Ragline  # the whole stack, only for part 2
    from ragline.settings import Settings

    qs = [
        json.loads(line)["question"]
        for line in (REPO / "benchmarks/data/d2l_questions.jsonl").read_text().splitlines()
    ][: args.limit]
    rags = {j: Ragline(Settings(index_dir=args.index, judge=j)) for j in ("reader", "evidence")}
    for r in rags.values():
        r.ask("What is dropout?")  # load the models and the index
    first: dict[str, list[float]] = {j: [] for j in rags}
    again: dict[str, list[float]] = {j: [] for j in rags}
    for q in qs:
        for j, r in rags.items():
            for bucket in (first, again):
                t0 = time.perf_counter()
                r.ask(q)
                bucket[j].append((time.perf_counter() - t0) * 1000)
    for r in rags.values():
        r.close()
    load1 = os.getloadavg()
    lines = [
        "# Reader latency",
        "",
        f"Produced by `python benchmarks/reader_latency.py --limit {args.limit}` "
        f"({time.strftime('%Y-%m-%d %H:%M')} UTC; {platform.machine()}, {os.cpu_count()} cores; "
        f"load average {load0[0]:.2f} before, {load1[0]:.2f} after). onnxruntime, int8 reader, "
        "up to 2 threads. Index: d2l-en, default settings.",
        "",
        "| passage tokens (+ 14 question and special) | ms per pair, median | p95 |",
        "|---:|---:|---:|",
        *[f"| {n} | {p50:.1f} | {p95:.1f} |" for n, p50, p95 in rows],
        "",
        f"Extractive answers, {len(qs)} d2l questions, each judge on the same index:",
        "",
        "| judge | first ask p50 ms | p95 | repeat p50 | p95 |",
        "|---|---:|---:|---:|---:|",
    ]
    for j in rags:
        lines.append(
            f"| {j} | {np.median(first[j]):.0f} | {np.percentile(first[j], 95):.0f} "
            f"| {np.median(again[j]):.0f} | {np.percentile(again[j], 95):.0f} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
