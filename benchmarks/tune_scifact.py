"""Tune ragline's retrieval defaults on the SciFact TRAIN split (never on test).

What it chooses, and how:

* fusion method (RRF or weighted min-max), the weights, RRF k, the candidate
  depth and the title boost: nDCG@10 over the 809 train queries;
* the relevance threshold (cosine floor applied after fusion): same objective;
* the confidence gate (``confidence_min``): the top cosine of the default
  hybrid search for the train claims (in scope: they should be answered)
  against ragline's 40 out-of-scope questions (they should get the fallback).

The index is the cached ``ragline eval`` index (built once through the real
chunker, embedder and store). Each query is searched ONCE per retriever,
``--depth`` chunks deep (vector; BM25 once per title boost); every fusion
setting is then a pure function (``ragline.fusion``) over those cached
lists, cut and scored exactly as ``Retriever.search`` + ``ragline eval`` would.

A BM25 diagnosis section recomputes BM25 outside the store with the tokeniser
LanceDB uses (``ragline.text.bm25``) on variants of the same corpus (whole
documents vs chunks, title and body as separate max-combined fields vs one
field, k1), to show where ragline's BM25 stands against the bm25s reference
(0.696, Lucene k1 1.5, b 0.75, title + abstract as one field).

Run (from the repository root, in the venv; ~10 min on 2 busy cores once the
eval index exists, which `ragline eval` or this script builds first):

    python benchmarks/tune_scifact.py [--data ../shared/data/scifact] [--cache-dir DIR]

Writes benchmarks/results/tuning.md.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from benchlib import SHARED
from machine import command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.eval.answers import load_questions
from ragline.eval.beir import load_beir
from ragline.eval.index import open_eval_index
from ragline.eval.runs import documents_of, evaluate
from ragline.fusion import reciprocal_rank_fusion, weighted_fusion
from ragline.settings import Settings
from ragline.store.reads import keyword_search, vector_search
from ragline.text import bm25
from ragline.types import FieldBoosts, Filters, Hit

REPO = Path(__file__).resolve().parents[1]
TITLE_BOOSTS = (0.5, 1.0, 1.5, 2.0, 3.0)
RRF_KS = (1, 5, 10, 20, 30, 45, 60, 80, 100, 150)
VECTOR_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(1, 10))
GRID_TITLE_BOOSTS = (1.0, 2.0)  # plus BM25's best, if another
CANDIDATES = (50, 100, 200)
THRESHOLDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
TOP_K = 10


def _slim(hit: Hit) -> Hit:
    """A hit without its chunk text (only ids and scores are needed here)."""
    return replace(hit, chunk=replace(hit.chunk, text="", metadata={}))


@dataclass(slots=True)
class Cached:
    """One query's ranked lists, searched once."""

    vector: list[Hit]
    keyword: dict[float, list[Hit]]  # title boost → BM25 hits
    qvec: np.ndarray


@dataclass(frozen=True, slots=True)
class Setting:
    method: str  # "rrf" | "weighted"
    title_boost: float
    candidates: int
    rrf_k: int = 60
    vector_weight: float = 0.5

    def label(self) -> str:
        if self.method == "rrf":
            return f"rrf k={self.rrf_k}"
        return f"weighted v={self.vector_weight:.1f}/k={1 - self.vector_weight:.1f}"


def fuse(c: Cached, s: Setting) -> list[Hit]:
    """What ``Retriever.search`` merges for this setting (depth = candidates)."""
    v, k = c.vector[: s.candidates], c.keyword[s.title_boost][: s.candidates]
    if s.method == "rrf":
        return reciprocal_rank_fusion([v, k], k=s.rrf_k)
    return weighted_fusion(v, k, s.vector_weight, round(1 - s.vector_weight, 1))


def keyword_list(title_boost: float) -> Callable[[Cached], list[Hit]]:
    return lambda c: c.keyword[title_boost]


def fused_list(s: Setting) -> Callable[[Cached], list[Hit]]:
    return lambda c: fuse(c, s)


def doc_ranking(
    hits: Sequence[Hit], doc_of: dict[str, str], top_k: int, depth_factor: float
) -> list[str]:
    chunk_k = max(top_k, math.ceil(top_k * depth_factor))
    return [d for d, _ in documents_of(hits[:chunk_k], doc_of)[:top_k]]


def score(
    cache: dict[str, Cached],
    qrels: dict[str, dict[str, int]],
    doc_of: dict[str, str],
    rank: Callable[[Cached], list[Hit]],
    depth_factor: float,
    top_k: int = TOP_K,
) -> dict[str, float]:
    ranking = {q: doc_ranking(rank(c), doc_of, top_k, depth_factor) for q, c in cache.items()}
    return evaluate(qrels, ranking)


def with_cosines(hits: list[Hit], qvec: np.ndarray, vectors: dict[str, np.ndarray]) -> list[Hit]:
    return [
        h
        if h.vector_score is not None
        else replace(h, vector_score=float(vectors[h.chunk.id] @ qvec))
        for h in hits
    ]


# ------------------------------------------------------------------ BM25 diagnosis


@dataclass(slots=True)
class FieldMatrix:
    """Saturated term weights of one field over a set of units (documents or chunks)."""

    weights: sp.csc_matrix  # units × terms
    idf: np.ndarray  # per term


@cache
def terms_of(text: str) -> Counter[str]:
    """LanceDB's analyser, once per distinct text (the variants share texts)."""
    return Counter(bm25.tokenize(text))


def field_matrix(
    texts: Sequence[Sequence[str]], vocab: dict[str, int], k1: float, b: float
) -> FieldMatrix:
    """``texts[i]`` lists the strings indexed together as unit i's field."""
    counts = [sum((terms_of(t) for t in parts), Counter()) for parts in texts]
    lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
    n = int((lengths > 0).sum())
    avgdl = float(lengths[lengths > 0].mean()) if n else 0.0
    rows, cols, vals = [], [], []
    df: Counter[str] = Counter()
    for i, c in enumerate(counts):
        df.update(c.keys())
        for term, tf in c.items():
            j = vocab.setdefault(term, len(vocab))
            rows.append(i)
            cols.append(j)
            vals.append(bm25.tf_weight(tf, int(lengths[i]), avgdl, k1, b))
    size = 1 << 20
    weights = sp.csc_matrix((vals, (rows, cols)), shape=(len(texts), size))
    idf = np.zeros(size)
    for term, d in df.items():
        idf[vocab[term]] = bm25.idf(d, n)
    return FieldMatrix(weights, idf)


def bm25_variant(
    units: Sequence[tuple[str, str, str]],  # (document id, title, body)
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    *,
    fields: str,  # "one" (title + body in one field) | "body" (body only) | "max" | "sum"
    k1: float,
    b: float = 0.75,
    title_boost: float = 2.0,
) -> float:
    """nDCG@10 of BM25 computed here over ``units`` (documents take their best unit)."""
    vocab: dict[str, int] = {}
    if fields == "one":
        mats = [(field_matrix([(t, x) for _, t, x in units], vocab, k1, b), 1.0)]
    elif fields == "body":
        mats = [(field_matrix([(x,) for _, _, x in units], vocab, k1, b), 1.0)]
    else:
        mats = [
            (field_matrix([(t,) for _, t, _ in units], vocab, k1, b), title_boost),
            (field_matrix([(x,) for _, _, x in units], vocab, k1, b), 1.0),
        ]
    ranking: dict[str, list[str]] = {}
    for qid, text in queries.items():
        terms = Counter(vocab[t] for t in bm25.tokenize(text) if t in vocab)
        if not terms:
            ranking[qid] = []
            continue
        cols = np.fromiter(terms.keys(), dtype=np.int64)
        counts = np.fromiter(terms.values(), dtype=np.float64)
        per_field = [
            boost * np.asarray(m.weights[:, cols] @ (m.idf[cols] * counts)).reshape(-1)
            for m, boost in mats
        ]
        s = np.sum(per_field, axis=0) if fields != "max" else np.max(per_field, axis=0)
        order = np.argsort(-s, kind="stable")
        docs: list[str] = []
        for i in order:
            if s[i] <= 0 or len(docs) == 100:
                break
            if units[i][0] not in docs:
                docs.append(units[i][0])
        ranking[qid] = docs
    return evaluate(qrels, ranking)["ndcg@10"]


# ------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SHARED / "scifact")
    ap.add_argument("--cache-dir", type=Path, default=None, help="eval index cache")
    ap.add_argument("--depth", type=int, default=300, help="chunks cached per retriever")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/tuning.md")
    ap.add_argument("--skip-diagnosis", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    loads = [load_average()[0]]

    base = Settings()
    if args.cache_dir is not None:
        base = base.model_copy(update={"eval_cache_dir": args.cache_dir})
    ds = load_beir(args.data, "train")
    embedder = make_embedder(base)
    index = open_eval_index(list(ds.corpus.values()), ds.corpus_hash, ds.root.name, base, embedder)
    store = index.rag.store
    scope: Filters = {"tenant": index.tenant}
    factor = base.eval_chunk_depth_factor
    print(f"index: {index.chunks} chunks ({'reused' if index.reused else 'built'})", flush=True)

    def search_all(queries: dict[str, str]) -> dict[str, Cached]:
        out: dict[str, Cached] = {}
        for i, (qid, text) in enumerate(queries.items(), start=1):
            qvec = np.asarray(embedder.embed_query(text), dtype=np.float32).reshape(-1)
            vec = [_slim(h) for h in vector_search(store, qvec, args.depth, scope)]
            kw = {
                tb: [
                    _slim(h)
                    for h in keyword_search(
                        store, text, args.depth, scope, FieldBoosts(tb, base.boost_headings, 1.0)
                    )
                ]
                for tb in TITLE_BOOSTS
            }
            out[qid] = Cached(vec, kw, qvec)
            if i % 100 == 0:
                print(f"  searched {i}/{len(queries)}", flush=True)
        return out

    t0 = time.perf_counter()
    cache = search_all(ds.queries)
    search_s = time.perf_counter() - t0
    loads.append(load_average()[0])
    qrels = ds.qrels
    doc_of = index.doc_of

    # -- single retrievers
    vector = score(cache, qrels, doc_of, lambda c: c.vector, factor)
    bm25_by_boost = {
        tb: score(cache, qrels, doc_of, keyword_list(tb), factor) for tb in TITLE_BOOSTS
    }
    best_boost_bm25 = max(TITLE_BOOSTS, key=lambda tb: bm25_by_boost[tb]["ndcg@10"])

    # -- fusion grid
    grid: list[tuple[Setting, dict[str, float]]] = []
    grid_boosts = sorted({*GRID_TITLE_BOOSTS, best_boost_bm25})
    settings_list = [
        Setting("rrf", tb, cand, rrf_k=k)
        for tb in grid_boosts
        for cand in CANDIDATES
        for k in RRF_KS
    ] + [
        Setting("weighted", tb, cand, vector_weight=w)
        for tb in grid_boosts
        for cand in CANDIDATES
        for w in VECTOR_WEIGHTS
    ]
    t0 = time.perf_counter()
    for i, s in enumerate(settings_list, start=1):
        grid.append((s, score(cache, qrels, doc_of, fused_list(s), factor)))
        if i % 50 == 0:
            print(f"  grid {i}/{len(settings_list)}", flush=True)
    grid_s = time.perf_counter() - t0
    loads.append(load_average()[0])
    grid.sort(key=lambda g: -g[1]["ndcg@10"])
    best, best_m = grid[0]
    best_rrf = next(g for g in grid if g[0].method == "rrf")
    best_weighted = next(g for g in grid if g[0].method == "weighted")
    shipped_before = next(g for g in grid if g[0] == Setting("rrf", 2.0, 100, rrf_k=60))

    # -- relevance threshold on the chosen fusion
    vectors: dict[str, np.ndarray] = {}
    for chunks, vecs in store.iter_chunks(2048):
        for ch, v in zip(chunks, vecs, strict=True):
            if ch.tenant == index.tenant:
                vectors[ch.id] = np.asarray(v, dtype=np.float32)
    fused = {q: with_cosines(fuse(c, best)[:100], c.qvec, vectors) for q, c in cache.items()}
    thresholds = {
        t: evaluate(
            qrels,
            {
                q: doc_ranking(
                    [h for h in hits if t <= 0 or (h.vector_score or 0) >= t], doc_of, TOP_K, factor
                )
                for q, hits in fused.items()
            },
        )
        for t in THRESHOLDS
    }
    best_t = max(THRESHOLDS, key=lambda t: (round(thresholds[t]["ndcg@10"], 4), -t))

    # -- confidence gate: top cosine among the top-10 chunks of the chosen search
    oos_questions = load_questions()
    oos = search_all({f"oos{i}": q for i, q in enumerate(oos_questions)})

    def top_cos(c: Cached) -> float:
        hits = with_cosines(fuse(c, best)[:TOP_K], c.qvec, vectors)
        return max((h.vector_score or 0.0) for h in hits) if hits else 0.0

    in_scores = np.array([top_cos(c) for c in cache.values()])
    out_scores = np.array([top_cos(c) for c in oos.values()])
    cand_t = np.round(np.arange(0.20, 0.70, 0.01), 2)

    def gate(t: float) -> tuple[float, float, float]:
        answered = float((in_scores >= t).mean())
        fallback = float((out_scores < t).mean())
        return answered, fallback, (answered + fallback) / 2

    best_gate = max(cand_t, key=lambda t: (gate(float(t))[2], -abs(t - base.confidence_min)))
    loads.append(load_average()[0])

    # -- BM25 diagnosis (pure recomputation, outside the store)
    diagnosis: list[tuple[str, float]] = []
    if not args.skip_diagnosis:
        docs = [(d.id, d.title, d.text) for d in ds.corpus.values()]
        chunk_units: list[tuple[str, str, str]] = []
        for chunks, _ in store.iter_chunks(2048):
            chunk_units += [
                (doc_of[c.doc_id], c.title, c.text) for c in chunks if c.tenant == index.tenant
            ]
        print("  diagnosis", flush=True)
        one, body, mx, sm = "one", "body", "max", "sum"
        variants: list[tuple[str, list[tuple[str, str, str]], str, float, float]] = [
            ("documents; title + abstract in one field; k1 1.5 (bm25s setup)", docs, one, 1.5, 1),
            ("documents; title + abstract in one field; k1 1.2 (LanceDB)", docs, one, 1.2, 1),
            ("documents; title, abstract fields; best boosted field, title ×2", docs, mx, 1.2, 2),
            ("documents; title, abstract fields; best boosted field, title ×1", docs, mx, 1.2, 1),
            ("documents; title, abstract fields; summed, title ×2", docs, sm, 1.2, 2),
            ("chunks as indexed (title line opens the body); body only", chunk_units, body, 1.2, 1),
            ("chunks as indexed; best boosted field, title ×2", chunk_units, mx, 1.2, 2),
            ("chunks as indexed; best boosted field, title ×1", chunk_units, mx, 1.2, 1),
        ]
        for label, units, fields, k1, tb in variants:
            ndcg = bm25_variant(units, ds.queries, qrels, fields=fields, k1=k1, title_boost=tb)
            diagnosis.append((label, ndcg))
            print(f"    {label}: {diagnosis[-1][1]:.4f}", flush=True)
    loads.append(load_average()[0])

    # -- report
    elapsed = time.perf_counter() - started
    cur_bm25 = bm25_by_boost[base.boost_title]["ndcg@10"]
    lines = [
        "# Tuning on SciFact train",
        "",
        f"Produced by `{command_line()}` in {elapsed:.0f} s ({search_s:.0f} s searching the "
        f"809 train queries once per retriever, {grid_s:.0f} s for the fusion grid).",
        "",
        *machine_lines(loads),
        f"- data: SciFact train split (../shared/data/scifact: {len(ds.queries)} queries, "
        f"{sum(len(v) for v in qrels.values())} judgements, {len(ds.corpus)} documents), "
        f"indexed by the `ragline eval` path as {index.chunks} chunks (section chunker, "
        f"{base.effective_chunk_max_tokens}-token chunks with {base.chunk_overlap_tokens} "
        "overlap; title → title field, a title line + the abstract → body), "
        "all-MiniLM-L6-v2 int8 ONNX, LanceDB native FTS.",
        "- objective: nDCG@10 (ir-measures), documents ranked by their best chunk among the "
        f"top {int(TOP_K * factor)} chunks (top-{TOP_K} × `eval_chunk_depth_factor` "
        f"{factor}); fusion over the top-`candidates` chunks of each retriever, exactly as "
        f"`Retriever.search` does; each query searched once, {args.depth} chunks deep.",
        "",
        "## Single retrievers",
        "",
        "| retriever | nDCG@10 | MRR@10 | R@100 |",
        "|---|---:|---:|---:|",
        f"| vector | {vector['ndcg@10']:.4f} | {vector['mrr@10']:.4f} "
        f"| {vector['recall@100']:.4f} |",
    ]
    for tb in TITLE_BOOSTS:
        m = bm25_by_boost[tb]
        lines.append(
            f"| bm25, title boost {tb} | {m['ndcg@10']:.4f} | {m['mrr@10']:.4f} "
            f"| {m['recall@100']:.4f} |"
        )
    lines += [
        "",
        "(R@100 here is bounded by the cached depth of "
        f"{args.depth} chunks, and the cut to {int(TOP_K * factor)} chunks; `ragline eval` "
        "reports it at its own depth.)",
        "",
        "## Fusion grid (best 15 of "
        f"{len(grid)}; title boosts {', '.join(map(str, grid_boosts))}; candidates "
        f"{', '.join(map(str, CANDIDATES))}; RRF k {', '.join(map(str, RRF_KS))}; "
        f"vector weight {VECTOR_WEIGHTS[0]}–{VECTOR_WEIGHTS[-1]} step 0.1, keyword = 1 − vector)",
        "",
        "| fusion | title boost | candidates | nDCG@10 | MRR@10 | R@10 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s, m in grid[:15]:
        lines.append(
            f"| {s.label()} | {s.title_boost} | {s.candidates} | {m['ndcg@10']:.4f} "
            f"| {m['mrr@10']:.4f} | {m['recall@10']:.4f} |"
        )
    lines += [
        "",
        "Best of each method, and the settings shipped before this tuning:",
        "",
        "| setting | nDCG@10 |",
        "|---|---:|",
        f"| best RRF: {best_rrf[0].label()}, title {best_rrf[0].title_boost}, candidates "
        f"{best_rrf[0].candidates} | {best_rrf[1]['ndcg@10']:.4f} |",
        f"| best weighted: {best_weighted[0].label()}, title {best_weighted[0].title_boost}, "
        f"candidates {best_weighted[0].candidates} | {best_weighted[1]['ndcg@10']:.4f} |",
        f"| before: rrf k=60, title 2.0, candidates 100 | {shipped_before[1]['ndcg@10']:.4f} |",
        "",
        "Per method and candidates (best over the other parameters):",
        "",
        "| candidates | " + " | ".join(["RRF", "weighted"]) + " |",
        "|---:|---:|---:|",
    ]
    for cand in CANDIDATES:
        r = max(m["ndcg@10"] for s, m in grid if s.method == "rrf" and s.candidates == cand)
        w = max(m["ndcg@10"] for s, m in grid if s.method == "weighted" and s.candidates == cand)
        lines.append(f"| {cand} | {r:.4f} | {w:.4f} |")
    by_weight = {
        s.vector_weight: m["ndcg@10"]
        for s, m in grid
        if s.method == "weighted"
        and (s.title_boost, s.candidates) == (best.title_boost, best.candidates)
    }
    lines += [
        "",
        f"Weighted fusion by vector weight (title {best.title_boost}, candidates "
        f"{best.candidates}):",
        "",
        "| vector weight | " + " | ".join(f"{w:.1f}" for w in VECTOR_WEIGHTS) + " |",
        "|---|" + "---:|" * len(VECTOR_WEIGHTS),
        "| nDCG@10 | " + " | ".join(f"{by_weight[w]:.4f}" for w in VECTOR_WEIGHTS) + " |",
        "",
        "## Relevance threshold (cosine floor after fusion, chosen fusion)",
        "",
        "| threshold | " + " | ".join(f"{t:.2f}" for t in THRESHOLDS) + " |",
        "|---|" + "---:|" * len(THRESHOLDS),
        "| nDCG@10 | " + " | ".join(f"{thresholds[t]['ndcg@10']:.4f}" for t in THRESHOLDS) + " |",
        "",
        "## Confidence gate",
        "",
        f"Score: the best cosine among the top-{TOP_K} chunks of the chosen hybrid search. "
        f"In scope: the {len(in_scores)} train claims (quartiles "
        f"{np.percentile(in_scores, 25):.3f} / {np.median(in_scores):.3f} / "
        f"{np.percentile(in_scores, 75):.3f}, min {in_scores.min():.3f}); out of scope: "
        f"ragline's {len(out_scores)} general questions (`src/ragline/eval/out_of_scope.jsonl`; "
        f"max {out_scores.max():.3f}, median {np.median(out_scores):.3f}).",
        "",
        "| confidence_min | claims answered | out-of-scope → fallback | balanced accuracy |",
        "|---:|---:|---:|---:|",
    ]
    for t in sorted({0.3, 0.35, 0.4, 0.45, base.confidence_min, 0.5, 0.55, float(best_gate)}):
        a, f, bacc = gate(t)
        lines.append(f"| {t:.2f} | {a:.3f} | {f:.3f} | {bacc:.3f} |")
    if diagnosis:
        lines += [
            "",
            "## BM25 diagnosis",
            "",
            "BM25 recomputed outside the store with LanceDB's analyser (`ragline.text.bm25`: "
            "simple tokeniser, lower case, English Snowball stemming, NLTK stop words, ASCII "
            "folding), b = 0.75, documents ranked by their best unit:",
            "",
            "| variant | nDCG@10 |",
            "|---|---:|",
            *[f"| {label} | {v:.4f} |" for label, v in diagnosis],
            f"| ragline `bm25` mode (LanceDB FTS, title ×{base.boost_title}), measured above "
            f"| {cur_bm25:.4f} |",
        ]
    summary = {
        "best": {
            "method": best.method,
            "title_boost": best.title_boost,
            "candidates": best.candidates,
            "rrf_k": best.rrf_k,
            "vector_weight": best.vector_weight,
            "ndcg@10": best_m["ndcg@10"],
        },
        "best_rrf": {
            "k": best_rrf[0].rrf_k,
            "candidates": best_rrf[0].candidates,
            "title_boost": best_rrf[0].title_boost,
            "ndcg@10": best_rrf[1]["ndcg@10"],
        },
        "bm25_best_boost": best_boost_bm25,
        "threshold": best_t,
        "confidence_min": float(best_gate),
        "vector": vector["ndcg@10"],
        "bm25": {str(k): v["ndcg@10"] for k, v in bm25_by_boost.items()},
    }
    lines += [
        "",
        "## Chosen (machine-readable)",
        "",
        "```json",
        json.dumps(summary, indent=2),
        "```",
    ]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    index.close()


if __name__ == "__main__":
    main()
