"""Fit the learned evidence scorer (logistic regression over a dozen features).

Each candidate sentence of a context gets the features of
:func:`ragline.answer.evidence.sentence_features` (key-term coverage, cosine,
its chunk's cosine, BM25 and how far it beats the other sentences of its
passage, answer type, constraints, block rank, position). The label is whether
the sentence *is* the evidence:

* SciFact train claims: the sentence is one of the gold rationale sentences of
  an evidence abstract of the claim;
* d2l answer set (``benchmarks/data/d2l_answers.jsonl``): the sentence holds the
  gold answer string and lies in an expected section.

Contexts are built by the real pipeline up to the generator with the whole
index (*answerable*) and with the evidence removed (*distractor*, as in
benchmarks/calibrate_evidence.py; every sentence there is a negative). The
model is fitted on the fit split only (SciFact odd claim ids, d2l train split),
each set weighted equally, with a small L2 penalty (Newton's method, numpy).
Thresholds are then chosen as in calibrate_evidence.py: per set the highest at
which at most ``--max-fallback`` of its fit answerable questions fall back. The
same rows are scored with the hand-weighted rule (shipped before) side by side,
and the lead sentence (the best-scoring one passing the gates, as the
extractive generator picks it) is checked against the gold evidence.

Run: python benchmarks/fit_evidence_scorer.py [--claims 200] [--reuse]
Rows are cached in benchmarks/.work/scorer_rows.json; writes
benchmarks/results/evidence_scorer.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import REPO, WORK
from ragline.answer.context import Context, build_context
from ragline.answer.evidence import FEATURES, EvidenceWeights
from ragline.answer.judging import judge_context
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import Ragline
from ragline.eval.distractor import contains_answer, in_expected, without
from ragline.settings import Settings
from ragline.types import Hit

Label = Callable[[Context, int, str], bool]


def _norm(s: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", s.lower()))


def run(
    rag: Ragline, question: str, drop: Callable[[Hit], bool], label: Label
) -> list[list[float]]:
    """[features…, label] of every candidate sentence of the context built without ``drop``."""
    s = rag.settings
    result = without(rag.search, drop, s.retrieval_top_k)(question)
    context = build_context(result.hits, TokenCounter(), s.max_context_tokens)
    ev = judge_context(question, context, rag.answerer.verifier.embed, EvidenceWeights())
    return [
        [*f, float(label(context, cand.block, cand.text))]
        for f, cand in zip(ev.features, ev.candidates, strict=True)
    ]


def collect_scifact(n: int) -> list[dict[str, Any]]:
    from calibrate_evidence import scifact_train_index

    data, index = scifact_train_index()
    rows = []
    for c in [c for c in data.claims if c.evidence][:n]:
        gold = {
            d: [_norm(data.sentences[d][i]) for i in sorted(idx)] for d, idx in c.evidence.items()
        }

        def doc(context: Context, block: int) -> str:
            b = context.block(block)
            return index.doc_of.get(b.hit.chunk.doc_id, "") if b is not None else ""

        def label(context: Context, block: int, text: str, gold: Any = gold) -> bool:
            t = _norm(text)
            return bool(t) and any(t in g or g in t for g in gold.get(doc(context, block), []))

        def drop(h: Hit, ev: frozenset[str] = frozenset(c.evidence)) -> bool:
            return index.doc_of.get(h.chunk.doc_id, "") in ev

        rows.append(
            {
                "set": "scifact",
                "split": "fit" if int(c.id) % 2 else "held-out",
                "id": c.id,
                "answerable": run(index.rag, c.text, lambda h: False, label),
                "distractor": run(index.rag, c.text, drop, lambda *a: False),
            }
        )
    index.close()
    return rows


def collect_d2l(index_dir: Path) -> list[dict[str, Any]]:
    rag = Ragline(Settings(index_dir=index_dir))
    rows = []
    for name in ("d2l_questions.jsonl", "d2l_answers.jsonl"):
        for line in (REPO / "benchmarks/data" / name).read_text().splitlines():
            q = json.loads(line)
            answers = q.get("answers", [])

            def label(context: Context, block: int, text: str, q: Any = q) -> bool:
                b = context.block(block)
                return (
                    b is not None
                    and contains_answer(text, q.get("answers", []))
                    and in_expected(b.hit.chunk.source, b.hit.chunk.section, q["expected"])
                )

            def drop(h: Hit, q: Any = q) -> bool:
                return in_expected(h.chunk.source, h.chunk.section, q["expected"]) or (
                    contains_answer(h.chunk.text, q.get("answers", []))
                )

            rows.append(
                {
                    "set": "d2l",
                    "split": "fit" if q["split"] == "train" else "held-out",
                    "id": q["id"],
                    "labelled": bool(answers),
                    "answerable": run(rag, q["question"], lambda h: False, label),
                    "distractor": run(rag, q["question"], drop, lambda *a: False)
                    if answers
                    else [],
                }
            )
    rag.close()
    return rows


def fit_logistic(
    x: np.ndarray, y: np.ndarray, sw: np.ndarray, l2: float = 1e-2, steps: int = 50
) -> tuple[np.ndarray, float]:
    """Weighted L2-penalised logistic regression by Newton's method (intercept unpenalised)."""
    a = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(a.shape[1])
    pen = np.full(a.shape[1], l2)
    pen[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(a @ w, -30, 30)))
        g = a.T @ (sw * (p - y)) + pen * w
        h = (a * (sw * p * (1 - p))[:, None]).T @ a + np.diag(pen + 1e-9)
        step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


Score = Callable[[np.ndarray], np.ndarray]


def best(rows: Sequence[Sequence[float]], score: Score) -> float:
    """Best score among the sentences passing the gates (answer type, constraints)."""
    a = np.asarray(rows, dtype=np.float64)
    if len(a) == 0:
        return -1.0
    ok = (a[:, 8] > 0) & (a[:, 9] > 0)
    return float(score(a[ok, :-1]).max()) if ok.any() else -1.0


def lead_hit(rows: Sequence[Sequence[float]], score: Score) -> float | None:
    """1 when the best passing sentence is gold evidence (None: no gold in the context)."""
    a = np.asarray(rows, dtype=np.float64)
    if len(a) == 0 or not (a[:, -1] > 0).any():
        return None
    ok = (a[:, 8] > 0) & (a[:, 9] > 0)
    if not ok.any():
        return 0.0
    s = np.where(ok, score(a[:, :-1]), -np.inf)
    return float(a[int(np.argmax(s)), -1])


def has_distractor(r: dict[str, Any]) -> bool:
    return bool(r["distractor"]) or r["set"] == "scifact"


def thresholds(rows: list[dict[str, Any]], score: Score, max_fallback: float) -> dict[str, float]:
    out = {}
    for s in sorted({r["set"] for r in rows}):
        ans = sorted(best(r["answerable"], score) for r in rows if r["set"] == s)
        out[s] = ans[int(max_fallback * len(ans))] if ans else 0.0
    return out


def rates(rows: list[dict[str, Any]], score: Score, t: float) -> tuple[float, float, int]:
    fb = sum(best(r["answerable"], score) < t for r in rows) / max(len(rows), 1)
    dis = [r for r in rows if has_distractor(r)]
    ab = sum(best(r["distractor"], score) < t for r in dis) / max(len(dis), 1)
    return fb, ab, len(dis)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--d2l-index", type=Path, default=Path("/tmp/i10-d2l-index"))
    ap.add_argument("--reuse", action="store_true", help="use the cached rows")
    ap.add_argument("--max-fallback", type=float, default=0.05)
    ap.add_argument("--l2", type=float, default=1e-2)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/evidence_scorer.md")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    cache = WORK / "scorer_rows.json"
    t0, load = time.perf_counter(), os.getloadavg()[0]
    if args.reuse and cache.is_file():
        rows = json.loads(cache.read_text())
    else:
        rows = collect_scifact(args.claims) + collect_d2l(args.d2l_index)
        cache.write_text(json.dumps(rows))
    collected = time.perf_counter() - t0

    fit_rows = [r for r in rows if r["split"] == "fit"]
    xs, ys, ws = [], [], []
    for s in ("scifact", "d2l"):
        sub = [
            f
            for r in fit_rows
            if r["set"] == s and r.get("labelled", True)
            for f in r["answerable"] + r["distractor"]
        ]
        a = np.asarray(sub, dtype=np.float64)
        xs.append(a[:, :-1])
        ys.append(a[:, -1])
        ws.append(np.full(len(a), 1.0 / len(a)))
    x, y, sw = np.vstack(xs), np.concatenate(ys), np.concatenate(ws) * len(np.concatenate(ws))
    coef, icpt = fit_logistic(x, y, sw, args.l2)

    def learned(a: np.ndarray) -> np.ndarray:
        return np.asarray(1 / (1 + np.exp(-np.clip(a @ coef + icpt, -30, 30))))

    def linear(a: np.ndarray) -> np.ndarray:  # the hand-weighted rule shipped before
        return np.asarray(0.8 * a[:, 0] + 0.0 * a[:, 1] + 0.2 * a[:, 2])

    def lead_linear(a: np.ndarray) -> np.ndarray:  # its lead pick: 0.4·score + 0.6·block cosine
        return np.asarray(0.4 * linear(a) + 0.6 * a[:, 3])

    lines = [
        "# Learned evidence scorer: fit and held-out figures",
        "",
        f"Produced by `python benchmarks/fit_evidence_scorer.py --claims {args.claims}` "
        f"({time.strftime('%Y-%m-%d %H:%M')} UTC; {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load:.1f} at the start; rows collected in {collected:.0f} s). "
        "Method: see the module docstring. Fitted on "
        f"{len(x)} sentences of the fit split ({int(y.sum())} evidence), L2 {args.l2}.",
        "",
        "| feature | weight |",
        "|---|---:|",
        *(f"| {n} | {c:+.3f} |" for n, c in zip(FEATURES, coef, strict=True)),
        f"| (intercept) | {icpt:+.3f} |",
        "",
    ]
    for name, score in (("learned", learned), ("hand-weighted (before)", linear)):
        t = thresholds(fit_rows, score, args.max_fallback)
        shown = {k: round(v, 3) for k, v in t.items()}
        lines += [
            f"## {name}: thresholds {shown}",
            "",
            "| set | split | n | answerable fallback | distractor n | distractor abstention "
            "| lead sentence is evidence |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        lead_score = learned if score is learned else lead_linear
        for s in ("scifact", "d2l"):
            for sp in ("fit", "held-out"):
                sub = [r for r in rows if r["set"] == s and r["split"] == sp]
                fb, ab, nd = rates(sub, score, t[s])
                hits = [h for r in sub if (h := lead_hit(r["answerable"], lead_score)) is not None]
                lead = f"{np.mean(hits):.3f} ({len(hits)})" if hits else "–"
                lines.append(f"| {s} | {sp} | {len(sub)} | {fb:.3f} | {nd} | {ab:.3f} | {lead} |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)
    print("COEF", [round(float(c), 4) for c in coef], round(icpt, 4))


if __name__ == "__main__":
    main()
