"""Extractive answer latency, two source trees side by side, and whether they answer alike.

A latency change measured on a shared machine means little unless both versions
see the same load, so this runs the *before* tree (``--before``, a ``src``
folder, for example ``git archive BASE src | tar -x -C /tmp/before``) and this
checkout's ``src`` as two worker processes over the same index and settings,
and asks each question of both in turn (the order alternating per question).
Every question is asked once per worker: a *first ask* (nothing of it cached
yet, after one warm-up question that loads the model and opens the index).

Reported: p50 / p95 of the whole ``ask`` per tree, the after/before ratio of
the medians, the load average before and after, and every question whose answer
differs (text, citations with their support spans and scores, confidence), which
should be none for a change meant to make answers faster only.

Run: python benchmarks/answer_latency_ab.py --before /tmp/before/src
     [--index /tmp/i10-d2l-index] [--scorer claims-learned] [--limit N]
     [--questions FILE.jsonl ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
QUESTION_FILES = (
    REPO / "benchmarks/data/d2l_questions.jsonl",
    REPO / "benchmarks/data/d2l_answers.jsonl",
)


def citation_record(c: Any) -> list[Any]:
    score = round(c.support_score, 6)
    return [c.number, c.chunk_id, c.support_start, c.support_end, score, c.supported]


def answer_record(answer: Any) -> dict[str, Any]:
    """What must not change: the text, each citation and its support, the confidence."""
    return {
        "text": answer.text,
        "fallback": answer.fallback,
        "citations": [citation_record(c) for c in answer.citations],
        "confidence": [round(answer.confidence.score, 6), answer.confidence.level],
        "reason": answer.confidence.reason,
    }


def worker(index: Path, scorer: str) -> None:
    """Answer questions read from stdin, one JSON line each: the time and the record."""
    from ragline.engine import Ragline
    from ragline.settings import Settings

    options: dict[str, Any] = {"index_dir": index}
    if scorer:
        options["evidence_scorer"] = scorer
    rag = Ragline(Settings(**options))
    rag.ask("What is a tensor?")  # loads the model and opens the index
    print("ready", flush=True)
    for line in sys.stdin:
        question = json.loads(line)
        t = time.perf_counter()
        answer = rag.ask(question)
        ms = (time.perf_counter() - t) * 1000.0
        print(json.dumps({"ms": ms, "answer": answer_record(answer)}), flush=True)
    rag.close()


def start(src: Path, index: Path, scorer: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, __file__, "--worker", "--index", str(index), "--scorer", scorer]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    if ready != "ready":
        raise SystemExit(f"worker on {src} did not start: {ready!r}")
    return proc


def ask(proc: subprocess.Popen[str], question: str) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(question) + "\n")
    proc.stdin.flush()
    reply: dict[str, Any] = json.loads(proc.stdout.readline())
    return reply


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="the src folder of the tree to compare with")
    ap.add_argument("--index", type=Path, default=Path("/tmp/i10-d2l-index"))
    ap.add_argument("--scorer", default="", help="RAGLINE_EVIDENCE_SCORER (default: settings)")
    ap.add_argument("--limit", type=int, default=0, help="first N questions (0: all)")
    ap.add_argument("--questions", type=Path, nargs="*", default=list(QUESTION_FILES))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.index, args.scorer)
        return
    if args.before is None:
        ap.error("--before is required")
    qs = list(
        dict.fromkeys(
            json.loads(line)["question"]
            for path in args.questions
            for line in path.read_text().splitlines()
            if line.strip()
        )
    )
    if args.limit:
        qs = qs[: args.limit]
    procs = {
        "before": start(args.before, args.index, args.scorer),
        "after": start(REPO / "src", args.index, args.scorer),
    }
    load0 = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in procs}
    differ: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for i, q in enumerate(qs):
        order = list(procs) if i % 2 == 0 else list(reversed(procs))
        got = {name: ask(procs[name], q) for name in order}
        for name, reply in got.items():
            times[name].append(reply["ms"])
        if got["before"]["answer"] != got["after"]["answer"]:
            differ.append((q, got["before"]["answer"], got["after"]["answer"]))
    load1 = os.getloadavg()
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(
        f"{len(qs)} questions, each asked once of each tree (first ask), scorer "
        f"{args.scorer or 'default'}; load average (1/5/15 min) "
        f"{load0[0]:.1f}/{load0[1]:.1f}/{load0[2]:.1f} before, "
        f"{load1[0]:.1f}/{load1[1]:.1f}/{load1[2]:.1f} after; {os.cpu_count()} cores"
    )
    print("| tree | n | p50 ms | p95 ms |\n|---|---:|---:|---:|")
    for name, ts in times.items():
        print(f"| {name} | {len(ts)} | {np.percentile(ts, 50):.0f} | {np.percentile(ts, 95):.0f} |")
    ratio = np.median(times["after"]) / np.median(times["before"])
    print(f"after / before median ratio: {ratio:.2f}")
    print(f"answers that differ: {len(differ)} of {len(qs)}")
    for q, before, after in differ:
        print(f"* {q}\n  before: {json.dumps(before)}\n  after:  {json.dumps(after)}")


if __name__ == "__main__":
    main()
