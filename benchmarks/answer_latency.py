"""Extractive answer latency, the two evidence scorers side by side.

One question loads the model and the index for each scorer; then each in-scope
d2l question (benchmarks/data/d2l_questions.jsonl) is asked ``--rounds`` times
with each scorer, alternating (weighted, learned, weighted, …) so both see the
same load. The first round is a *first ask* (nothing of the question cached);
later rounds repeat it (sentence embeddings come from the embedding cache).
Reported: p50 and p95 of the whole ``ask`` (retrieval, evidence check,
extractive generation, citation check), the load average before and after, and
the learned/weighted ratio of the first-ask medians (the fair comparison on a
shared machine).

Run: python benchmarks/answer_latency.py [--index DIR] [--rounds 3] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from ragline.engine import Ragline
from ragline.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, default=Path("/tmp/i10-d2l-index"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=30)
    args = ap.parse_args()
    qs = [
        json.loads(line)["question"]
        for line in (REPO / "benchmarks/data/d2l_questions.jsonl").read_text().splitlines()
    ][: args.limit]
    rags = {
        name: Ragline(Settings(index_dir=args.index, evidence_scorer=name))  # type: ignore[arg-type]
        for name in ("weighted", "learned")
    }
    load0 = os.getloadavg()
    times: dict[tuple[str, str], list[float]] = {}
    for rag in rags.values():
        rag.ask("What is a tensor?")  # loads the model and opens the index
    for r in range(args.rounds):
        for q in qs:
            for name, rag in rags.items():
                t = time.perf_counter()
                rag.ask(q)
                key = (name, "first ask" if r == 0 else "repeated")
                times.setdefault(key, []).append((time.perf_counter() - t) * 1000)
    load1 = os.getloadavg()
    print(
        f"{len(qs)} questions × {args.rounds} rounds; load average (1/5/15 min) "
        f"{load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} before, "
        f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} after; {os.cpu_count()} cores"
    )
    print("| scorer | asks | n | p50 ms | p95 ms |\n|---|---|---:|---:|---:|")
    for (name, kind), ts in sorted(times.items()):
        p50, p95 = np.percentile(ts, 50), np.percentile(ts, 95)
        print(f"| {name} | {kind} | {len(ts)} | {p50:.0f} | {p95:.0f} |")
    ratio = np.median(times[("learned", "first ask")]) / np.median(times[("weighted", "first ask")])
    print(f"learned / weighted first-ask median ratio: {ratio:.2f}")
    for rag in rags.values():
        rag.close()


if __name__ == "__main__":
    main()
