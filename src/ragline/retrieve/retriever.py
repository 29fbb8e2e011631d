"""Search orchestration: embed, retrieve, fuse, threshold, rerank, cut, expand.

:class:`Retriever` is the only retrieval code that does I/O (through the
:class:`~ragline.store.base.Store` and :class:`~ragline.embed.base.Embedder` it
is given); every decision in between is one of the pure functions in
:mod:`ragline.retrieve`. Each stage is timed into ``SearchResult.timings_ms``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Literal, cast, get_args

import numpy as np

from ragline.embed.base import Embedder, Vectors
from ragline.retrieve.expand import expand_neighbours
from ragline.retrieve.fusion import reciprocal_rank_fusion, weighted_fusion
from ragline.retrieve.rerank import Reranker, make_reranker
from ragline.settings import Settings
from ragline.store.base import CandidateStore, ChunkVectorReader, HybridCandidateReader, Store
from ragline.text.language import detect_language
from ragline.types import Chunk, Filters, Hit, SearchResult

SearchMode = Literal["bm25", "vector", "hybrid"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

#: Stages reported in ``SearchResult.timings_ms``; every key is always present (0.0
#: for a stage that did not run). Scoring keyword-only hits against the query vector
#: counts as ``fusion`` in hybrid mode and as ``threshold`` in bm25 mode. On a
#: :class:`~ragline.store.base.CandidateStore`, loading the returned hits' chunks
#: counts as ``fusion`` in hybrid mode and as the retriever's own stage otherwise.
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


def fill_vector_scores(hits: list[Hit], query_vector: Vectors, store: Store) -> list[Hit]:
    """Give hits that lack a cosine (keyword-only hits) one, from their stored vectors.

    One ``store.vectors_for`` call; vectors are L2-normalised, so the dot product is
    the cosine. A hit whose vector the store no longer has keeps ``None``.
    """
    missing = [h.chunk.id for h in hits if h.vector_score is None]
    if not missing:
        return hits
    vectors = store.vectors_for(missing)
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    out: list[Hit] = []
    for h in hits:
        vec = vectors.get(h.chunk.id) if h.vector_score is None else None
        if vec is not None:
            h = replace(h, vector_score=float(np.asarray(vec, dtype=np.float32).reshape(-1) @ q))
        out.append(h)
    return out


def placeholder_chunk(chunk_id: str) -> Chunk:
    """A chunk known only by its id. Fusion, cosine filling and the threshold need
    nothing else, so candidates from a :class:`CandidateStore` carry one until
    :func:`load_chunks` swaps in the stored chunk for the hits that are returned."""
    return Chunk(
        id=chunk_id,
        doc_id="",
        tenant="",
        source="",
        title="",
        chapter="",
        section="",
        heading_path=(),
        url="",
        anchor="",
        chunk_index=0,
        start_char=0,
        end_char=0,
        token_count=0,
        word_count=0,
        has_code=False,
        has_equations=False,
        content_hash="",
        created_at="",
        text="",
    )


def candidate_hits(pairs: list[tuple[str, float]], kind: Literal["vector", "keyword"]) -> list[Hit]:
    """(id, score) pairs from a :class:`CandidateStore` as ranked hits with placeholder
    chunks; the score is the cosine or the BM25 score, as ``*_search`` would give it."""
    if kind == "vector":
        return [Hit(chunk=placeholder_chunk(i), score=s, vector_score=s) for i, s in pairs]
    return [Hit(chunk=placeholder_chunk(i), score=s, keyword_score=s) for i, s in pairs]


_CANDIDATE_METHODS = ("vector_candidates", "keyword_candidates", "chunks_for")


def _has(store: object, method: str) -> bool:
    """Whether the store's class (not a forwarding wrapper's ``__getattr__``) has it."""
    return callable(getattr(type(store), method, None))


def as_candidate_store(store: Store) -> CandidateStore | None:
    """``store`` if its class implements the :class:`CandidateStore` calls itself.

    The check is on the class, not the instance: a wrapper that overrides
    ``vector_search`` (to log, or to restrict access) and forwards other attributes
    with ``__getattr__`` must not be bypassed through forwarded candidate calls.
    """
    if all(_has(store, m) for m in _CANDIDATE_METHODS):
        return cast(CandidateStore, store)
    return None


def load_chunks(
    hits: list[Hit], store: CandidateStore, query_vector: Vectors | None = None
) -> list[Hit]:
    """The hits with their stored chunks, in one store call. A hit whose chunk was
    deleted since the search is dropped (it can no longer be shown or cited).

    With ``query_vector``, hits that lack a cosine get one: from the vectors read in the
    same call when the store has ``chunks_with_vectors`` (:class:`ChunkVectorReader`),
    else from a :func:`fill_vector_scores` call of their own.
    """
    if not hits:
        return hits
    ids = [h.chunk.id for h in hits]
    one_read = _has(store, "chunks_with_vectors")
    if query_vector is None or all(h.vector_score is not None for h in hits) or not one_read:
        chunks = store.chunks_for(ids)
        loaded = [replace(h, chunk=chunks[h.chunk.id]) for h in hits if h.chunk.id in chunks]
        return loaded if query_vector is None else fill_vector_scores(loaded, query_vector, store)
    stored = cast(ChunkVectorReader, store).chunks_with_vectors(ids)
    q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
    out: list[Hit] = []
    for h in hits:
        found = stored.get(h.chunk.id)
        if found is None:
            continue
        chunk, vec = found
        cosine = h.vector_score
        if cosine is None:
            cosine = float(np.asarray(vec, dtype=np.float32).reshape(-1) @ q)
        out.append(replace(h, chunk=chunk, vector_score=cosine))
    return out


def apply_threshold(hits: list[Hit], threshold: float) -> list[Hit]:
    """Hits whose cosine to the query is at least ``threshold`` (all when it is ≤ 0).

    A hit with no known cosine cannot show it is relevant, so a positive threshold
    drops it.
    """
    if threshold <= 0:
        return hits
    return [h for h in hits if h.vector_score is not None and h.vector_score >= threshold]


def _with_ranks(hits: list[Hit]) -> list[Hit]:
    return [h if h.rank == i else replace(h, rank=i) for i, h in enumerate(hits, start=1)]


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
        ``filters`` are equality tests pushed down to the store, and the settings'
        tenant is added unless they name one; ``expand`` adds that many chunks
        before/after each hit (default ``settings.expand_neighbours``).

        Order: retrieve (``max(candidates, top_k)`` deep) → fuse → cosine for
        keyword-only hits → threshold → rerank (``rrf_rerank`` only) → cut to
        ``top_k`` → expand. The threshold comes before the reranker so no rerank
        work is spent on hits that would be dropped, and the reranker sees
        ``max(rerank_depth, top_k)`` hits so every returned hit was reranked.
        """
        s = self.settings
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

        # A CandidateStore ranks by id; chunks are loaded for the returned hits only.
        store = self.store
        ranked = as_candidate_store(store)
        vector_hits: list[Hit] = []
        keyword_hits: list[Hit] = []
        both = mode == "hybrid" and ranked is not None and _has(store, "hybrid_candidates")
        if both:  # one call: a store that runs the two searches concurrently
            assert qvec is not None
            vpairs, kpairs, ms = cast(HybridCandidateReader, store).hybrid_candidates(
                qvec, query, depth, scope, s.boosts
            )
            vector_hits = candidate_hits(vpairs, "vector")
            keyword_hits = candidate_hits(kpairs, "keyword")
            clock.overlapped({"vector": ms["vector"], "keyword": ms["keyword"]})
        if mode != "bm25" and not both:
            assert qvec is not None
            if ranked is not None:
                pairs = ranked.vector_candidates(qvec, depth, scope)
                vector_hits = candidate_hits(pairs, "vector")
            else:
                vector_hits = store.vector_search(qvec, depth, scope)
            clock.lap("vector")
        if mode != "vector" and not both:
            if ranked is not None:
                pairs = ranked.keyword_candidates(query, depth, scope, s.boosts)
                keyword_hits = candidate_hits(pairs, "keyword")
            else:
                keyword_hits = store.keyword_search(query, depth, scope, s.boosts)
            clock.lap("keyword")

        if mode == "hybrid":
            if s.hybrid_merge_method == "weighted":
                hits = weighted_fusion(
                    vector_hits, keyword_hits, s.hybrid_vector_weight, s.hybrid_keyword_weight
                )
            else:
                hits = reciprocal_rank_fusion([vector_hits, keyword_hits], k=s.rrf_k)
        else:
            hits = vector_hits if mode == "vector" else keyword_hits

        # Without a threshold or reranker, the cosines only the returned hits need come
        # with their chunks in one read (CandidateStore); otherwise from their own call.
        cosines_on_load = ranked is not None and threshold <= 0 and not rerank
        if qvec is not None and mode != "vector" and not cosines_on_load:
            # Only hits that can still reach the output need a cosine: all of them
            # when a threshold may drop some, else the head the reranker or the cut sees.
            reach = len(hits) if threshold > 0 else (rerank_depth if rerank else top_k)
            hits = fill_vector_scores(hits[:reach], qvec, self.store) + hits[reach:]
        clock.lap("fusion" if mode == "hybrid" else "threshold")

        hits = apply_threshold(hits, threshold)
        clock.lap("threshold")

        if ranked is not None:
            head = hits[: rerank_depth if rerank else top_k]
            hits = load_chunks(head, ranked, qvec if cosines_on_load else None)
            clock.lap({"hybrid": "fusion", "vector": "vector", "bm25": "keyword"}[mode])

        if rerank:
            hits = self.reranker.rerank(query, hits[:rerank_depth], top_k) if hits else []
            clock.lap("rerank")

        hits = _with_ranks(hits[:top_k])
        if expand > 0 and hits:
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
            hits=hits,
            timings_ms=clock.stop(),
            language=detect_language(query),
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
