"""Calibrate ragline's reader and choose its bars; compare it with today's evidence check.

1. **Platt scaling** (``reader_scale``, ``reader_shift``): a one-feature logistic fit of
   the label on the reader's logit over ``--platt`` pairs drawn from the reader's own
   *training* split (held-in: training/reader_data.py), with a reliability table on
   those and on as many *test* pairs (whole held-out SQuAD articles, odd SciFact claims).
2. **Bars** on the real pipeline up to the generator, as benchmarks/calibrate_evidence.py
   runs it: every question or claim is asked with the whole index (*answerable*) and with
   its evidence removed (*distractor*). The reader reads the context blocks; the question
   answers when its best block's calibrated probability reaches the bar. Fit rows: d2l
   ``train`` questions and even-id SciFact claims (the reader's held-in half); held out:
   d2l ``dev`` and odd-id claims. Each bar is the highest that keeps at most
   ``--max-fallback`` (0.05) of its fit answerable rows from falling back. ``reader_high``:
   the lowest probability above which ≥ 95 % of the fit rows (answerable and distractor
   together) are answerable ones.
3. **SQuAD 2.0 held-out articles**: each question against the 5 paragraphs of its article
   closest to it by the embedder's cosine, own paragraph included (*answerable*, for
   answerable questions) and excluded (*distractor*); unanswerable questions against
   their own closest five. Answerability AUC and abstention at the question bar.

Run: python training/reader_data.py --out training/pairs.jsonl
     python benchmarks/calibrate_reader.py --d2l-index DIR
Writes benchmarks/results/reader.md; caches readings in benchmarks/.work/reader_rows.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragline.answer.context import build_context
from ragline.answer.evidence import evidence_weights
from ragline.answer.judging import judge_context
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import Ragline
from ragline.eval.distractor import without
from ragline.reader import Reader
from ragline.settings import Settings
from ragline.types import Hit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_evidence import SHARED, d2l_questions, scifact_train_index

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / ".work"
sys.path.insert(0, str(REPO / "training"))


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a random positive outscores a random negative), ties half."""
    if not pos or not neg:
        return float("nan")
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (p.size * n.size))


def platt(logits: list[float], labels: list[int]) -> tuple[float, float]:
    """(scale, shift) maximising the likelihood of ``labels`` under sigmoid(a·x + b)."""
    x, y = np.asarray(logits), np.asarray(labels, dtype=np.float64)
    a, b = 1.0, 0.0
    for _ in range(100):  # Newton's method on two parameters
        p = 1 / (1 + np.exp(-(a * x + b)))
        g = np.array([((p - y) * x).sum(), (p - y).sum()])
        w = p * (1 - p) + 1e-9
        h = np.array([[(w * x * x).sum(), (w * x).sum()], [(w * x).sum(), w.sum()]])
        step = np.linalg.solve(h + 1e-6 * np.eye(2), g)
        a, b = a - step[0], b - step[1]
        if np.abs(step).max() < 1e-8:
            break
    return float(a), float(b)


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z)) if z > -60 else 0.0


def pair_logits(reader: Reader, pairs: list[dict[str, Any]]) -> list[float]:
    out: list[float] = []
    for i in range(0, len(pairs), 32):
        chunk = pairs[i : i + 32]
        out += [r.logit for r in reader.read_pairs([(p["q"], p["p"]) for p in chunk])]
    return out


def reliability(probs: list[float], labels: list[int], bins: int = 10) -> list[str]:
    rows = []
    p, y = np.asarray(probs), np.asarray(labels)
    for k in range(bins):
        lo, hi = k / bins, (k + 1) / bins
        sel = (p >= lo) & ((p < hi) if k < bins - 1 else (p <= hi))
        if sel.sum():
            rows.append(
                f"| {lo:.1f}–{hi:.1f} | {int(sel.sum())} | {p[sel].mean():.3f} "
                f"| {y[sel].mean():.3f} |"
            )
    return rows


def block_logits(
    reader: Reader, rag: Ragline, question: str, drop: Callable[[Hit], bool]
) -> dict[str, Any]:
    """The reader's logit per context block and today's evidence verdict, on the context
    the pipeline builds from the search without ``drop``."""
    s = rag.settings
    result = without(rag.search, drop, s.retrieval_top_k)(question)
    context = build_context(result.hits, TokenCounter(), s.max_context_tokens)
    blocks = list(context.blocks)[: s.reader_max_passages]
    passages = [f"{b.label}\n{b.text}" if b.label else b.text for b in blocks]
    logits = [r.logit for r in reader.read(question, passages)]
    ev = judge_context(question, context, rag.answerer.verifier.embed, evidence_weights(s))
    return {
        "logits": logits,
        "evidence": bool(ev.answers),
        "top_cos": max((h.vector_score or 0.0 for h in result.hits), default=0.0),
    }


def collect(reader: Reader, claims: int, d2l_index: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    data, index = scifact_train_index()
    for c in [c for c in data.claims if c.evidence][:claims]:
        ev_docs = set(c.evidence)

        def drop(h: Hit, ev_docs: set[str] = ev_docs) -> bool:
            return index.doc_of.get(h.chunk.doc_id, "") in ev_docs

        rows.append(
            {
                "set": "scifact",
                "split": "held-out" if int(c.id) % 2 else "fit",
                "id": c.id,
                "answerable": block_logits(reader, index.rag, c.text, lambda h: False),
                "distractor": block_logits(reader, index.rag, c.text, drop),
            }
        )
    index.close()
    rag = Ragline(Settings(index_dir=d2l_index, judge="evidence"))
    for q, dropq in d2l_questions():
        rows.append(
            {
                "set": "d2l",
                "split": "fit" if q["split"] == "train" else "held-out",
                "id": q["id"],
                "gold": bool(q.get("answers")),
                "answerable": block_logits(reader, rag, q["question"], lambda h: False),
                "distractor": block_logits(reader, rag, q["question"], dropq),
            }
        )
    rag.close()
    return rows


def squad_rows(reader: Reader, limit: int, seed: int) -> list[dict[str, Any]]:
    from reader_data import held_out_article

    from ragline.embed.onnx import OnnxEmbedder

    embed = OnnxEmbedder()
    data = json.loads((SHARED / "squad2" / "dev-v2.0.json").read_text())["data"]
    items = []
    for i, art in enumerate(data):
        if not held_out_article(i):
            continue
        paras = [p["context"] for p in art["paragraphs"]]
        for pi, p in enumerate(art["paragraphs"]):
            for qa in p["qas"]:
                items.append((paras, pi, qa))
    random.Random(seed).shuffle(items)
    rows = []
    vec_cache: dict[int, Any] = {}
    for paras, pi, qa in items[:limit]:
        key = id(paras)
        if key not in vec_cache:
            vec_cache[key] = embed.embed_documents(paras)
        qv = np.asarray(embed.embed_query(qa["question"])).reshape(-1)
        order = list(np.argsort(-(vec_cache[key] @ qv)))
        with_own = order[:5] if pi in order[:5] else [pi, *order[:4]]
        without_own = [j for j in order if j != pi][:5]
        row: dict[str, Any] = {"impossible": qa["is_impossible"]}
        row["answerable"] = [
            r.logit for r in reader.read(qa["question"], [paras[j] for j in with_own])
        ]
        row["distractor"] = [
            r.logit for r in reader.read(qa["question"], [paras[j] for j in without_own])
        ]
        rows.append(row)
    return rows


def read_pairs(reader: Reader, args: argparse.Namespace) -> dict[str, Any]:
    """The reader's logits on ``--platt`` held-in and as many held-out training pairs."""
    rng = random.Random(args.seed)
    pairs = [json.loads(x) for x in args.pairs.open(encoding="utf-8")]
    held_in = rng.sample([p for p in pairs if p["split"] == "train"], args.platt)
    held_out = rng.sample([p for p in pairs if p["split"] == "test"], args.platt)
    return {
        name: [
            [lg, p["label"], p["source"]]
            for lg, p in zip(pair_logits(reader, sample), sample, strict=True)
        ]
        for name, sample in (("held_in", held_in), ("held_out", held_out))
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=Path, default=REPO / "training" / "pairs.jsonl")
    ap.add_argument("--platt", type=int, default=2000)
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--squad", type=int, default=500)
    ap.add_argument("--d2l-index", type=Path, default=Path("/tmp/d2l-index"))
    ap.add_argument("--max-fallback", type=float, default=0.05)
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--only", choices=("pairs", "rows", "squad"), default=None)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--model", type=Path, default=None, help="a reader file to calibrate (default: shipped)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/reader.md")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    cache = WORK / "reader_rows.json"
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    reader = Reader(args.model)
    if args.only:
        # One part of the readings, in its own process: the parts run side by side
        # on a busy machine, then a run with --reuse joins them.
        if args.only == "pairs":
            part = read_pairs(reader, args)
        elif args.only == "rows":
            part = {"rows": collect(reader, args.claims, args.d2l_index)}
        else:
            part = {"squad": squad_rows(reader, args.squad, args.seed)}
        (WORK / f"reader_rows.{args.only}.json").write_text(json.dumps(part))
        return
    parts = [WORK / f"reader_rows.{name}.json" for name in ("pairs", "rows", "squad")]
    if args.reuse and all(p.is_file() for p in parts):
        cached = {k: v for p in parts for k, v in json.loads(p.read_text()).items()}
        cache.write_text(json.dumps(cached))
    elif args.reuse and cache.is_file():
        cached = json.loads(cache.read_text())
    else:
        cached = {
            **read_pairs(reader, args),
            "rows": collect(reader, args.claims, args.d2l_index),
            "squad": squad_rows(reader, args.squad, args.seed),
        }
        cache.write_text(json.dumps(cached))
    a, b = platt([r[0] for r in cached["held_in"]], [r[1] for r in cached["held_in"]])

    def prob(logits: list[float]) -> float:
        return max((sigmoid(a * x + b) for x in logits), default=0.0)

    rows = cached["rows"]
    fit_rows = [r for r in rows if r["split"] == "fit"]
    bars: dict[str, float] = {}
    for s in ("scifact", "d2l"):
        ans = sorted(prob(r["answerable"]["logits"]) for r in fit_rows if r["set"] == s)
        bars[s] = ans[int(args.max_fallback * len(ans))] if ans else 0.5
    # The combined judge (evidence and reader): its own reader bars, each the highest
    # that keeps the combined fit fallback within the bound.
    both_bars: dict[str, float] = {}
    for s in ("scifact", "d2l"):
        sub = [r for r in fit_rows if r["set"] == s]
        allowed = int(args.max_fallback * len(sub))
        passing = sorted(
            prob(r["answerable"]["logits"]) for r in sub if r["answerable"]["evidence"]
        )
        already = len(sub) - len(passing)  # the evidence check's own fallbacks
        k = allowed - already
        both_bars[s] = passing[k] if 0 <= k < len(passing) else 0.0
    pooled = sorted(
        [(prob(r["answerable"]["logits"]), 1) for r in fit_rows]
        + [(prob(r["distractor"]["logits"]), 0) for r in fit_rows if has_distractor(r)],
        reverse=True,
    )
    high = 1.0
    hits = 0
    for k, (p, y) in enumerate(pooled, start=1):
        hits += y
        if hits / k >= 0.95:
            high = p
    lines = [
        "# ragline's reader: calibration, bars and the judges compared",
        "",
        f"Produced by `python benchmarks/calibrate_reader.py --claims {args.claims} --squad "
        f"{args.squad} --platt {args.platt}` ({time.strftime('%Y-%m-%d')}; {platform.machine()}, "
        f"{os.cpu_count()} cores, load average {load:.1f} at the start; "
        f"{time.perf_counter() - t0:.0f} s). Model: `src/ragline/reader/assets/reader-int8.onnx`. "
        "Method: the module docstring.",
        "",
        f"**Chosen**: `reader_scale` {a:.4f}, `reader_shift` {b:.4f}; `reader_threshold` "
        f"(questions, d2l fit) {bars['d2l']:.3f}; `reader_claim_threshold` (claims, SciFact fit) "
        f"{bars['scifact']:.3f}; `reader_high` {high:.3f}. For the combined judge "
        f"(`judge=both`, the default): question bar {both_bars['d2l']:.3f}, claim bar "
        f"{both_bars['scifact']:.3f} (chosen the same way on the combined fallback).",
        "",
        "## Reliability of the calibrated probability (pairs)",
        "",
    ]
    for name in ("held_in", "held_out"):
        data = cached[name]
        probs = [sigmoid(a * r[0] + b) for r in data]
        labels = [r[1] for r in data]
        pos = [p for p, y in zip(probs, labels, strict=True) if y]
        neg = [p for p, y in zip(probs, labels, strict=True) if not y]
        lines += [
            f"{name.replace('_', '-')} ({len(data)} pairs, AUC {auc(pos, neg):.3f}):",
            "",
            "| probability | pairs | mean probability | share answering |",
            "|---|---:|---:|---:|",
            *reliability(probs, labels),
            "",
        ]
    lines += [
        "## Distractor protocol: answer or abstain (ragline's contexts)",
        "",
        "Answerable fallback: share of the rows asked with the whole index that fall back; "
        "distractor abstention: share of the rows asked without their evidence that fall "
        "back (SciFact claims and the d2l answer set; the older conceptual d2l questions "
        "count as answerable only). Judges: *evidence* (today's default before the reader: "
        "key-term coverage, answer types, learned scorer), *reader* (the bars above), "
        "*both* (answer only when both say so, with the combined judge's own reader bars); "
        "*both, sure reader overrides*: as *both*, but a reader probability of at least "
        "`reader_high` answers even when the evidence check's word rules refuse (a "
        "candidate, not shipped: it changes no row here).",
        "",
        "| set | split | n | judge | answerable fallback | distractor n "
        "| distractor abstention | AUC |",
        "|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for s in ("scifact", "d2l"):
        bar = bars[s]
        for sp in ("fit", "held-out"):
            sub = [r for r in rows if r["set"] == s and r["split"] == sp]
            dis = [r for r in sub if has_distractor(r)]
            if not sub:
                continue
            judges: dict[str, Callable[[dict[str, Any]], bool]] = {
                "evidence": lambda x: bool(x["evidence"]),
                "reader": lambda x, bar=bar: prob(x["logits"]) >= bar,
                "both": lambda x, bar=both_bars[s]: (
                    bool(x["evidence"]) and prob(x["logits"]) >= bar
                ),
                # A candidate, not shipped: the reader alone answers when it is sure
                # (reader_high), whatever the evidence check's word rules say. It
                # changed no row of these sets (2026-11-27), so it would be dead weight.
                "both, sure reader overrides": lambda x, bar=both_bars[s]: (
                    (bool(x["evidence"]) and prob(x["logits"]) >= bar) or prob(x["logits"]) >= high
                ),
            }
            for jname, answers in judges.items():
                fb = sum(not answers(r["answerable"]) for r in sub) / len(sub)
                ab = sum(not answers(r["distractor"]) for r in dis) / max(len(dis), 1)
                au = (
                    auc(
                        [prob(r["answerable"]["logits"]) for r in dis],
                        [prob(r["distractor"]["logits"]) for r in dis],
                    )
                    if jname == "reader"
                    else float("nan")
                )
                lines.append(
                    f"| {s} | {sp} | {len(sub)} | {jname} | {fb:.3f} | {len(dis)} | {ab:.3f} | "
                    + ("" if math.isnan(au) else f"{au:.3f}")
                    + " |"
                )
    sq = cached["squad"]
    bar = bars["d2l"]
    pos = [prob(r["answerable"]) for r in sq if not r["impossible"]]
    neg = [prob(r["distractor"]) for r in sq if not r["impossible"]]
    imp = [prob(r["answerable"]) for r in sq if r["impossible"]]
    lines += [
        "",
        "## SQuAD 2.0, held-out articles (5 closest same-article paragraphs)",
        "",
        f"{len(sq)} questions drawn at random (seed {args.seed}) from the 4 held-out articles.",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| answerability AUC: own paragraph in the five vs removed ({len(pos)} questions) "
        f"| {auc(pos, neg):.3f} |",
        f"| AUC, answerable questions vs unanswerable ones ({len(imp)}) with their own "
        f"paragraph | {auc(pos, imp):.3f} |",
        f"| answerable fallback at the question bar {bar:.3f} | {rate(pos, bar):.3f} |",
        f"| abstention with the own paragraph removed | {rate(neg, bar):.3f} |",
        f"| abstention on unanswerable questions | {rate(imp, bar):.3f} |",
    ]
    lines += ["", *veto_table(args.pairs)]
    if args.reuse:
        lines[2] += (
            " Tables recomputed from the cached readings (`--reuse`); the readings were "
            "collected by the three `--only` parts run side by side (about 35 minutes wall "
            "on the shared machine, load average 10-18)."
        )
    text = "\n".join(lines) + "\n"
    args.out.write_text(text)
    print(text)


def veto_table(pairs_path: Path) -> list[str]:
    """How often the year (and a number) check vetoes SQuAD/QNLI pairs that answer and
    pairs that do not: whether that check still helps beside the reader."""
    import re

    from ragline.answer.evidence import question_constraints, years

    rows = [json.loads(x) for x in pairs_path.open(encoding="utf-8")]

    def year_veto(r: dict[str, Any]) -> bool:
        c = question_constraints(r["q"])
        found = years(r["p"])
        return bool(c.years) and bool(found) and not set(c.years) <= found

    def number_veto(r: dict[str, Any]) -> bool:
        c = question_constraints(r["q"])
        text = r["p"].replace(",", "")
        return bool(c.numbers) and not all(
            re.search(r"(?<![\d.])" + re.escape(n.rstrip("%")) + r"(?![\d])", text)
            for n in c.numbers
        )

    out = [
        "## The year and number checks beside the reader (SQuAD 2.0 and QNLI pairs)",
        "",
        "Share of pairs a check vetoes: it should veto non-answering pairs, never answering ones.",
        "",
        "| split | check | answering pairs vetoed | constraint swaps | unanswerable | "
        "same-article | QNLI negatives |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for split in ("train", "test"):
        sub = [
            r
            for r in rows
            if r["split"] == split and r["source"].split("-")[0] in ("squad", "qnli")
        ]
        for name, check in (("year", year_veto), ("number", number_veto)):

            def share(
                sel: list[dict[str, Any]], check: Callable[[dict[str, Any]], bool] = check
            ) -> str:
                return f"{sum(check(r) for r in sel)} / {len(sel)}"

            pos = [r for r in sub if r["label"] == 1]
            cells = [
                share([r for r in sub if r["source"] == k])
                for k in ("squad-swap", "squad-impossible", "squad-distractor")
            ]
            qn = share([r for r in sub if r["source"] == "qnli" and r["label"] == 0])
            out.append(f"| {split} | {name} | {share(pos)} | " + " | ".join(cells) + f" | {qn} |")
    return out


def rate(probs: list[float], bar: float) -> float:
    """Share below the bar (falls back)."""
    return sum(p < bar for p in probs) / max(len(probs), 1)


def has_distractor(r: dict[str, Any]) -> bool:
    """As benchmarks/calibrate_evidence.py: SciFact claims and the d2l answer set."""
    return r["set"] == "scifact" or str(r["id"]).startswith("a")


if __name__ == "__main__":
    main()
