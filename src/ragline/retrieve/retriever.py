"""Search orchestration: embed, retrieve, fuse, threshold, rerank, cut, expand.

:class:`Retriever` is the only retrieval code that does I/O (through the
:class:`~ragline.store.base.Store` and :class:`~ragline.embed.base.Embedder` it
is given); every decision in between is one of the pure functions in
:mod:`ragline.retrieve`. Each stage is timed into ``SearchResult.timings_ms``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Literal, get_args

import numpy as np

from ragline.embed.base import Embedder, Vectors
from ragline.fusion import rrf_scored, weighted_pairs
from ragline.retrieve.expand import (
    expand_graph,
    expand_neighbours,
    related_by_index,
)
from ragline.retrieve.rerank import Reranker, make_reranker
from ragline.settings import Settings
from ragline.store.base import MALFORMED_CHUNKS, CandidateQuery, Ranking, Store, chunk_problem
from ragline.store.reads import vectors_for
from ragline.text.language import query_language
from ragline.types import Filters, Fused, Hit, Scored, SearchResult

SearchMode = Literal["bm25", "vector", "hybrid"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

#: Stages reported in ``SearchResult.timings_ms``; every key is always present (0.0
#: for a stage that did not run). Scoring keyword-only candidates against the query
#: vector counts as ``fusion`` in hybrid mode and as ``threshold`` in bm25 mode;
#: loading the returned hits' chunks counts as ``fusion`` in hybrid mode and as the
#: retriever's own stage otherwise.
TIMING_KEYS = ("embed", "vector", "keyword", "fusion", "rerank", "threshold", "expand", "total")

MAX_TOP_K = 1000
MAX_EXPAND = 10


class _Clock:
    """Accumulates milliseconds per stage."""

    def __init__(self) -> None:
        self.ms = dict.fromkeys(TIMING_KEYS, 0.0)
        self._start = self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        """Charge the time since the previous lap to ``stage``."""
        now = time.perf_counter()
        self.ms[stage] += (now - self._t) * 1000.0
        self._t = now

    def overlapped(self, stages: dict[str, float]) -> None:
        """Charge stages that ran concurrently their own times (which may sum to more
        than the time since the previous lap) and start the next lap now."""
        for stage, ms in stages.items():
            self.ms[stage] += ms
        self._t = time.perf_counter()

    def stop(self) -> dict[str, float]:
        self.ms["total"] = (time.perf_counter() - self._start) * 1000.0
        return self.ms


def _cosine(vector: Vectors, q: Vectors) -> float:
    """Cosine of a stored vector to the query vector: their dot product, as the
    embedder L2-normalises both (one float32 dot per vector, so a cosine never depends
    on which other vectors came in the same read)."""
    if not isinstance(vector, np.ndarray) or vector.dtype != np.float32 or vector.ndim != 1:
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    return float(vector @ q)


def fuse(
    vector: Ranking,
    keyword: Ranking,
    mode: SearchMode,
    settings: Settings,
    limit: int | None = None,
) -> list[Fused]:
    """The candidate lists of ``mode`` as one ranking by id (no chunk read yet); with
    ``limit``, possibly only its head (at least ``limit`` entries when there are)."""
    if mode == "hybrid" and settings.hybrid_merge_method == "weighted":
        w = (settings.hybrid_vector_weight, settings.hybrid_keyword_weight)
        return weighted_pairs(vector, keyword, *w, limit=limit)
    vs = [Scored(i, s, vector_score=s) for i, s in vector]
    ks = [Scored(i, s, keyword_score=s) for i, s in keyword]
    if mode == "hybrid":
        return rrf_scored([vs, ks], k=settings.rrf_k)
    items = vs if mode == "vector" else ks
    return [
        Fused(x.id, x.score, r, x.vector_score, x.keyword_score) for r, x in enumerate(items, 1)
    ]


def with_cosines(ranked: list[Fused], store: Store, query_vector: Vectors) -> list[Fused]:
    """``ranked`` with the cosine filled in where a list lacked it (keyword-only
    candidates), from one ``store.vectors_for`` read; a candidate whose vector the
    store no longer has keeps None."""
    missing = [f.id for f in ranked if f.vector_score is None]
    if not missing:
        return ranked
    vectors = vectors_for(store, missing)
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    out = []
    for f in ranked:
        vector = vectors.get(f.id) if f.vector_score is None else None
        if vector is not None:  # a new Fused, not dataclasses.replace: 5× cheaper per entry
            f = Fused(f.id, f.score, f.rank, _cosine(vector, q), f.keyword_score)
        out.append(f)
    return out


def to_hits(ranked: list[Fused], store: Store, query_vector: Vectors | None) -> list[Hit]:
    """The ranked candidates as hits with their stored chunks, read in one call. A
    candidate deleted since its search is dropped (it can no longer be shown or
    cited); with ``query_vector``, a hit still lacking a cosine gets it from the
    vector read with its chunk."""
    if not ranked:
        return []
    rows = store.chunks_with_vectors([f.id for f in ranked])
    q = None if query_vector is None else np.asarray(query_vector, np.float32).reshape(-1)
    hits = []
    for f in ranked:
        found = rows.get(f.id)
        if found is None:
            continue
        chunk, vec = found
        cosine = f.vector_score
        if cosine is None and q is not None:
            cosine = _cosine(vec, q)
        hits.append(
            Hit(
                chunk=chunk,
                score=f.score,
                rank=f.rank,
                vector_score=cosine,
                keyword_score=f.keyword_score,
            )
        )
    return hits


def apply_threshold(ranked: list[Fused], threshold: float) -> list[Fused]:
    """Candidates whose cosine to the query is at least ``threshold`` (all when it is
    ≤ 0). One with no known cosine cannot show it is relevant, so a positive
    threshold drops it."""
    if threshold <= 0:
        return ranked
    return [f for f in ranked if f.vector_score is not None and f.vector_score >= threshold]


def _with_ranks(hits: list[Hit]) -> list[Hit]:
    return [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(hits, start=1)]


log = logging.getLogger("ragline.retrieve")


def sound_hits(hits: list[Hit]) -> list[Hit]:
    """``hits`` without those whose stored chunk is malformed (:func:`chunk_problem`):
    each is logged with its id (once) and recorded in :data:`MALFORMED_CHUNKS`, so one
    bad row costs an answer one passage, not every request that retrieves it."""
    kept = []
    for h in hits:
        problem = chunk_problem(h.chunk)
        if problem is None:
            kept.append(h)
            continue
        chunk_id = str(h.chunk.id)
        if MALFORMED_CHUNKS.note(chunk_id, problem):
            log.error(
                "stored chunk %s is malformed (%s); left out of answers until it is re-ingested",
                chunk_id,
                problem,
            )
    return kept


class Retriever:
    """Answers ``search`` calls from one store with one embedder and one settings object."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        settings: Settings,
        reranker: Reranker | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self.reranker = reranker if reranker is not None else make_reranker(settings)

    def search(
        self,
        query: str,
        *,
        mode: SearchMode | None = None,
        top_k: int | None = None,
        filters: Filters | None = None,
        expand: int | None = None,
    ) -> SearchResult:
        """The ``top_k`` best chunks for ``query`` (plus neighbours when expanding).

        ``mode`` defaults to hybrid when ``HYBRID_SEARCH_ENABLED``, else vector;
        ``filters`` (:mod:`ragline.store.filter_ast`) are pushed down to the store, and
        the settings'
        tenant is added unless they name one; ``expand`` adds that many chunks
        before/after each hit (default ``settings.expand_neighbours``), and
        ``settings.expand_section`` the rest of each hit's section; an explicit
        ``expand=0`` turns both off (evaluation rankings, benchmarks).

        One path for every store and mode: candidates by id and score
        (``max(candidates, top_k)`` deep) → fuse (in the store for weighted hybrid,
        which fuses on its own row positions where it can) → cosine for keyword-only
        candidates when a threshold needs it → threshold → the head's chunks (with
        their vectors, which give the remaining keyword-only hits their cosine) in
        one read → rerank (``rrf_rerank`` only) → cut to ``top_k`` → expand. The
        threshold comes before the reranker so no rerank work is spent on hits that
        would be dropped, and the reranker sees ``max(rerank_depth, top_k)`` hits so
        every returned hit was reranked.
        """
        s = self.settings
        section = self.settings.expand_section and expand != 0
        query, mode, top_k, expand = self._validate(query, mode, top_k, expand)
        scope: Filters = dict(filters or {})
        scope.setdefault("tenant", s.tenant)
        depth = max(s.candidates, top_k)
        threshold = s.relevance_threshold
        rerank = mode == "hybrid" and s.hybrid_merge_method == "rrf_rerank"
        rerank_depth = max(s.rerank_depth, top_k)

        clock = _Clock()
        qvec: Vectors | None = None
        if mode != "bm25" or threshold > 0:
            qvec = self.embedder.embed_query(query)
            clock.lap("embed")

        # 1. candidates by id and score, 2. fused, thresholded and cut on ids; a
        # threshold needs every candidate's cosine, without one only the head the
        # reranker or the cut keeps is needed (weighted hybrid: the store fuses)
        store = self.store
        head = None if threshold > 0 else (rerank_depth if rerank else top_k)
        weighted = mode == "hybrid" and s.hybrid_merge_method == "weighted"
        found = store.candidates(
            CandidateQuery(
                depth,
                vector=None if mode == "bm25" else qvec,
                text=None if mode == "vector" else query,
                filters=scope,
                boosts=s.boosts,
                weights=(s.hybrid_vector_weight, s.hybrid_keyword_weight) if weighted else None,
                limit=head,
            )
        )
        if mode == "hybrid":
            clock.overlapped(found.ms)
        else:
            clock.lap(mode.replace("bm25", "keyword"))
        if found.fused is not None:
            ranked = found.fused
        else:
            ranked = fuse(found.vector, found.keyword, mode, s, head)
        if threshold > 0 and qvec is not None and mode != "vector":
            ranked = with_cosines(ranked, store, qvec)
        clock.lap("fusion" if mode == "hybrid" else "threshold")
        ranked = apply_threshold(ranked, threshold)
        clock.lap("threshold")

        # 3. rows of the hits the reranker or the cut can still return
        hits = sound_hits(to_hits(ranked[: rerank_depth if rerank else top_k], store, qvec))
        clock.lap({"hybrid": "fusion", "vector": "vector", "bm25": "keyword"}[mode])

        if rerank:
            hits = self.reranker.rerank(query, hits[:rerank_depth], top_k) if hits else []
            clock.lap("rerank")

        hits = _with_ranks(hits[:top_k])
        graph = store.abilities.related_chunks is not None
        if (expand > 0 or section) and (section or graph):
            hits = self._expand_graph(hits, expand, section) if hits else hits
            clock.lap("expand")
        elif expand > 0 and hits:
            hits = expand_neighbours(
                hits,
                self.store.chunks_by_index,
                window=expand,
                token_budget=s.expand_token_budget,
            )
            clock.lap("expand")

        return SearchResult(
            query=query,
            mode=mode,
            hits=sound_hits(hits),
            timings_ms=clock.stop(),
            language=query_language(query),
        )

    def _expand_graph(self, hits: list[Hit], window: int, section: bool) -> list[Hit]:
        """Graph expansion: neighbours and (``section``) the hit's section, from
        the store's one-query lookup when it has one, else its neighbour lookup."""
        s = self.settings
        span = s.expand_section_span
        lookup = self.store.abilities.related_chunks
        if lookup is not None:
            related = lookup([h.chunk.id for h in hits], window, section, span)
        else:
            related = related_by_index(
                hits,
                self.store.chunks_by_index,
                window=window,
                same_section=section,
                span=span,
            )
        return expand_graph(
            hits,
            related,
            window=window,
            same_section=section,
            token_budget=s.expand_token_budget,
        )

    def _validate(
        self, query: str, mode: str | None, top_k: int | None, expand: int | None
    ) -> tuple[str, SearchMode, int, int]:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        if mode is None:
            mode = "hybrid" if self.settings.hybrid_search_enabled else "vector"
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {', '.join(SEARCH_MODES)}; got {mode!r}")
        if top_k is None:
            top_k = self.settings.retrieval_top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be an integer from 1 to {MAX_TOP_K}; got {top_k!r}")
        if expand is None:
            expand = self.settings.expand_neighbours
        if isinstance(expand, bool) or not isinstance(expand, int) or not 0 <= expand <= MAX_EXPAND:
            raise ValueError(f"expand must be an integer from 0 to {MAX_EXPAND}; got {expand!r}")
        return query, mode, top_k, expand  # type: ignore[return-value]
