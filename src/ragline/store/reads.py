"""One-side searches and whole-chunk hits over any :class:`~ragline.store.base.Store`.

The retriever asks :meth:`Store.candidates` for ids and scores and reads rows only
for the hits it keeps; scripts, benchmarks, ingest and tests often want one side's
ranking, its hits with their chunks, or stored vectors. These functions build that
from the protocol, so no store implements them (they were seven methods per store).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragline.embed.base import Vectors
from ragline.store.base import CandidateQuery, Ranking, Store
from ragline.types import FieldBoosts, Filters, Hit


def vector_candidates(
    store: Store, query: Vectors, k: int, filters: Filters | None = None
) -> Ranking:
    """Top-k (chunk id, cosine) pairs, best first."""
    return store.candidates(CandidateQuery(k, vector=query, filters=filters)).vector


def keyword_candidates(
    store: Store,
    query: str,
    k: int,
    filters: Filters | None = None,
    boosts: FieldBoosts | None = None,
) -> Ranking:
    """Top-k (chunk id, BM25 score) pairs, best first; positive scores only."""
    found = store.candidates(CandidateQuery(k, text=query, filters=filters, boosts=boosts))
    return found.keyword


def _hits(store: Store, pairs: Ranking, cosine: bool) -> list[Hit]:
    """``pairs`` with their stored chunks, the score also as the cosine or the BM25
    score; an id deleted since its search is dropped."""
    rows = store.chunks_with_vectors([i for i, _ in pairs])
    return [
        Hit(
            chunk=rows[i][0],
            score=s,
            vector_score=s if cosine else None,
            keyword_score=None if cosine else s,
        )
        for i, s in pairs
        if i in rows
    ]


def vector_search(
    store: Store, query: Vectors, k: int, filters: Filters | None = None
) -> list[Hit]:
    """:func:`vector_candidates` with their chunks; ``Hit.vector_score`` is the cosine."""
    return _hits(store, vector_candidates(store, query, k, filters), cosine=True)


def keyword_search(
    store: Store,
    query: str,
    k: int,
    filters: Filters | None = None,
    boosts: FieldBoosts | None = None,
) -> list[Hit]:
    """:func:`keyword_candidates` with their chunks; ``Hit.keyword_score`` is BM25."""
    pairs = keyword_candidates(store, query, k, filters, boosts)
    return _hits(store, pairs, cosine=False)


def vectors_for(store: Store, ids: Sequence[str]) -> dict[str, Vectors]:
    """Stored vectors of the given chunk ids (unknown ids are absent): the store's
    own vector read where it declares one, else its rows' vectors."""
    read = store.abilities.vectors
    if read is not None:
        return read(ids)
    return {i: v for i, (_, v) in store.chunks_with_vectors(ids).items()}


def document_vectors(store: Store, doc_id: str) -> dict[str, Vectors]:
    """content_hash → stored vector of a document's chunks, so the unchanged chunks
    of a changed file are not embedded again."""
    chunks = store.chunks_by_index(doc_id)
    rows = store.chunks_with_vectors([c.id for c in chunks])
    return {c.content_hash: v for c, v in rows.values()}
