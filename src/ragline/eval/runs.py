"""Search an eval index in every retrieval mode and score the rankings.

Chunk hits are merged into their documents (a document's place is that of its
best chunk; its score the best chunk's score), because relevance is judged per
document. Metrics come from ir-measures (trec_eval underneath), never from
hand-written formulas. Rankings are handed to it with scores that strictly
decrease with rank, so ties in the engine's scores cannot make trec_eval reorder
what ragline returned.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import ir_measures
import numpy as np
from ir_measures import RR, P, R, nDCG

from ragline.embed.base import Embedder
from ragline.retrieve.rerank import Reranker, make_reranker
from ragline.retrieve.retriever import MAX_TOP_K, Retriever, SearchMode
from ragline.settings import MergeMethod, RerankerName, RetrieveSettings, Settings
from ragline.store.base import Store
from ragline.types import Hit

EvalMode = Literal["bm25", "vector", "hybrid-rrf", "hybrid-weighted", "rerank"]
EVAL_MODES: tuple[str, ...] = get_args(EvalMode)

#: Report name → ir-measures measure.
MEASURES: dict[str, Any] = {
    "ndcg@10": nDCG @ 10,
    "mrr@10": RR @ 10,
    "recall@10": R @ 10,
    "recall@100": R @ 100,
    "p@5": P @ 5,
    # the specifications' own cut-offs (seeds 001, 002): nDCG@5, top-3 recall, MRR
    "ndcg@5": nDCG @ 5,
    "recall@3": R @ 3,
    "mrr": RR,
}
METRIC_NAMES: tuple[str, ...] = tuple(MEASURES)

#: Rerankers that score with a model: with one of these, ``rerank`` is a default mode.
MODEL_RERANKERS: frozenset[RerankerName] = frozenset({"cross-encoder", "reader"})

#: query id → document ids, best first
Ranking = dict[str, list[str]]
Qrels = Mapping[str, Mapping[str, int]]
#: progress(done, total, label) while a mode runs
RunProgress = Callable[[int, int, str], None]


def mode_search(mode: str) -> tuple[SearchMode, MergeMethod | None]:
    """The retriever mode and merge method an eval mode stands for."""
    table: dict[str, tuple[SearchMode, MergeMethod | None]] = {
        "bm25": ("bm25", None),
        "vector": ("vector", None),
        "hybrid-rrf": ("hybrid", "rrf"),
        "hybrid-weighted": ("hybrid", "weighted"),
        "rerank": ("hybrid", "rrf_rerank"),
    }
    if mode not in table:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(EVAL_MODES)}")
    return table[mode]


def default_mode(settings: RetrieveSettings) -> str:
    """The eval mode that ``ragline search`` uses with these settings."""
    if not settings.hybrid_search_enabled:
        return "vector"
    return {"rrf": "hybrid-rrf", "weighted": "hybrid-weighted", "rrf_rerank": "rerank"}[
        settings.hybrid_merge_method
    ]


def parse_modes(text: str | None, settings: RetrieveSettings) -> list[str]:
    """``--modes a,b`` checked; by default every mode, ``rerank`` only when a model
    reranker (a cross-encoder or ragline's reader) is configured (the heuristic one
    can still be asked for)."""
    if text is None or not text.strip():
        modes = [m for m in EVAL_MODES if m != "rerank"]
        if settings.reranker in MODEL_RERANKERS:
            modes.append("rerank")
        return modes
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in EVAL_MODES]
    if bad:
        raise ValueError(f"unknown mode(s) {', '.join(bad)}; choose from {', '.join(EVAL_MODES)}")
    return list(dict.fromkeys(modes))


def documents_of(hits: Sequence[Hit], doc_of: Mapping[str, str]) -> list[tuple[str, float]]:
    """Chunk hits (best first) → (document id, best chunk score), in the order each
    document first appears. Chunks of documents outside ``doc_of`` are ignored."""
    seen: dict[str, float] = {}
    for h in hits:
        doc = doc_of.get(h.chunk.doc_id)
        if doc is not None and doc not in seen:
            seen[doc] = h.score
    return list(seen.items())


def _run(ranking: Ranking) -> dict[str, dict[str, float]]:
    """The ranking as an ir-measures run, scores strictly decreasing with rank."""
    return {
        qid: {doc: float(len(docs) - i) for i, doc in enumerate(docs)}
        for qid, docs in ranking.items()
    }


def evaluate(qrels: Qrels, ranking: Ranking) -> dict[str, float]:
    """Mean of each metric over the judged queries (a query with no ranking scores 0)."""
    run = _run(ranking)
    qrels_dict = {q: dict(r) for q, r in qrels.items()}
    sums = dict.fromkeys(METRIC_NAMES, 0.0)
    names = {str(m): name for name, m in MEASURES.items()}
    for metric in ir_measures.iter_calc(list(MEASURES.values()), qrels_dict, run):
        sums[names[str(metric.measure)]] += float(metric.value)
    n = len(qrels_dict)
    return {k: (v / n if n else 0.0) for k, v in sums.items()}


def by_language(
    qrels: Qrels, ranking: Ranking, languages: Mapping[str, str]
) -> dict[str, dict[str, float]]:
    """The metrics over each language's queries (tagged ones only), languages sorted;
    empty when fewer than two languages are tagged (the overall row says it all)."""
    groups: dict[str, list[str]] = {}
    for qid in qrels:
        if qid in languages:
            groups.setdefault(languages[qid], []).append(qid)
    if len(groups) < 2:
        return {}
    out: dict[str, dict[str, float]] = {}
    for lang in sorted(groups):
        ids = groups[lang]
        scores = evaluate({q: qrels[q] for q in ids}, {q: ranking.get(q, []) for q in ids})
        out[lang] = {"queries": float(len(ids)), **scores}
    return out


def per_query(qrels: Qrels, ranking: Ranking, metric: str = "ndcg@10") -> dict[str, float]:
    """One metric per judged query (0 for queries without results)."""
    run = _run(ranking)
    values = dict.fromkeys(qrels, 0.0)
    for m in ir_measures.iter_calc([MEASURES[metric]], {q: dict(r) for q, r in qrels.items()}, run):
        values[m.query_id] = float(m.value)
    return values


def percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    if not values_ms:
        return {"p50": math.nan, "p95": math.nan, "p99": math.nan, "mean": math.nan}
    arr = np.asarray(values_ms, dtype=np.float64)
    p50, p95, p99 = np.percentile(arr, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99), "mean": float(arr.mean())}


@dataclass(slots=True)
class ModeResult:
    """One mode's scores, latencies and ranking."""

    mode: str
    metrics: dict[str, float]
    latency_ms: dict[str, float]
    ranking: Ranking = field(default_factory=dict)
    #: language → {"queries": n, metric: value}, when the queries carry two or more
    languages: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metrics": {k: round(v, 4) for k, v in self.metrics.items()},
            "latency_ms": {k: round(v, 3) for k, v in self.latency_ms.items()},
        }
        if self.languages:
            out["languages"] = {
                lang: {k: (int(v) if k == "queries" else round(v, 4)) for k, v in m.items()}
                for lang, m in self.languages.items()
            }
        return out


def run_mode(
    mode: str,
    queries: Mapping[str, str],
    qrels: Qrels,
    retriever: Retriever,
    doc_of: Mapping[str, str],
    *,
    top_k: int,
    chunk_depth_factor: float,
    progress: RunProgress | None = None,
) -> ModeResult:
    """Search every query in ``mode``; latency is the wall time of each search call
    (query embedding included), after one warm-up query."""
    search_mode, _ = mode_search(mode)
    chunk_k = min(MAX_TOP_K, max(top_k, math.ceil(top_k * chunk_depth_factor)))
    ranking: Ranking = {}
    latencies: list[float] = []
    items = list(queries.items())
    if items:
        retriever.search(items[0][1], mode=search_mode, top_k=chunk_k, expand=0)  # warm-up
    for i, (qid, text) in enumerate(items, start=1):
        t0 = time.perf_counter()
        result = retriever.search(text, mode=search_mode, top_k=chunk_k, expand=0)
        latencies.append((time.perf_counter() - t0) * 1000.0)
        ranking[qid] = [doc for doc, _ in documents_of(result.hits, doc_of)[:top_k]]
        if progress:
            progress(i, len(items), mode)
    return ModeResult(mode, evaluate(qrels, ranking), percentiles(latencies), ranking)


def retriever_for(
    mode: str,
    store: Store,
    embedder: Embedder,
    settings: Settings,
    reranker: Reranker | None = None,
) -> Retriever:
    """A retriever over ``store`` whose hybrid merge is the one ``mode`` stands for."""
    _, merge = mode_search(mode)
    s = settings
    if merge is not None and merge != settings.hybrid_merge_method:
        s = settings.model_copy(update={"hybrid_merge_method": merge})
    return Retriever(store, embedder, s, reranker if reranker is not None else make_reranker(s))


@dataclass(slots=True)
class RetrievalReport:
    """Everything ``ragline eval`` prints for a retrieval run."""

    dataset: str
    split: str
    queries: int
    documents: int
    chunks: int
    top_k: int
    model: str
    default_mode: str
    index: dict[str, Any]
    settings: dict[str, Any]
    results: list[ModeResult]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "split": self.split,
            "queries": self.queries,
            "documents": self.documents,
            "chunks": self.chunks,
            "top_k": self.top_k,
            "model": self.model,
            "default_mode": self.default_mode,
            "index": self.index,
            "settings": self.settings,
            "modes": {r.mode: r.to_dict() for r in self.results},
            "seconds": round(self.seconds, 2),
        }


def retrieval_settings(settings: Settings) -> dict[str, Any]:
    """The settings a retrieval score depends on (recorded with every report)."""
    keys = (
        "hybrid_merge_method",
        "hybrid_vector_weight",
        "hybrid_keyword_weight",
        "rrf_k",
        "candidates",
        "boost_title",
        "boost_headings",
        "boost_text",
        "relevance_threshold",
        "reranker",
        "rerank_depth",
        "chunker",
        "eval_chunk_depth_factor",
    )
    out = {k: getattr(settings, k) for k in keys}
    out["chunk_max_tokens"] = settings.effective_chunk_max_tokens
    return out


def run_retrieval(
    queries: Mapping[str, str],
    qrels: Qrels,
    store: Store,
    embedder: Embedder,
    settings: Settings,
    doc_of: Mapping[str, str],
    modes: Sequence[str],
    *,
    top_k: int,
    progress: RunProgress | None = None,
    reranker: Reranker | None = None,
    languages: Mapping[str, str] | None = None,
) -> list[ModeResult]:
    """Every mode over every query (``qrels`` restricted to ``queries``); scored per
    language too when ``languages`` tags the queries with two or more."""
    judged = {q: qrels[q] for q in queries if q in qrels}
    results: list[ModeResult] = []
    for mode in modes:
        retriever = retriever_for(mode, store, embedder, settings, reranker)
        results.append(
            run_mode(
                mode,
                queries,
                judged,
                retriever,
                doc_of,
                top_k=top_k,
                chunk_depth_factor=settings.eval_chunk_depth_factor,
                progress=progress,
            )
        )
        results[-1].languages = by_language(judged, results[-1].ranking, languages or {})
    return results
