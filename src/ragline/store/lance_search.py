"""A LanceStore's searches: on its in-process mirror (:mod:`ragline.store.lance_memory`)
when that is on and built, else as LanceDB's own vector and full-text queries.

Functions of the store's state (:class:`_LanceHandles`), which
:class:`~ragline.store.lance.LanceStore` calls; split from it so the store module
keeps to table handles, writes and maintenance.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ragline.embed.base import Vectors
from ragline.fusion import weighted_pairs, weighted_positions
from ragline.store.arrow import arrow_to_chunks, arrow_vectors
from ragline.store.base import (
    CHUNK_COLUMNS,
    CandidateQuery,
    Candidates,
    Ranking,
    StoreError,
    candidates_in_turn,
)
from ragline.store.filter_sql import chunk_predicate
from ragline.store.filters import sql_in_list
from ragline.store.lance_cache import latest_version, read_rows
from ragline.store.lance_indexes import KEYWORD_FIELDS
from ragline.store.lance_memory import (
    BACKGROUND_ROWS,
    LanceMirror,
    Pinned,
    Snapshot,
    settled_stamp,
)
from ragline.store.lance_tables import Meta, run
from ragline.store.stages import STAGES
from ragline.store.vector_index import IntArray
from ragline.text.bm25 import query_counts
from ragline.types import Chunk, FieldBoosts, Filters, Fused

if TYPE_CHECKING:  # LanceDB's own queries import it when they run (store/lance_cache.py)
    from lancedb.table import AsyncTable

log = logging.getLogger(__name__)

#: Longest keyword query kept, in characters (BM25 over a whole page is noise).
MAX_QUERY_CHARS = 2000

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)

Pairs = list[tuple[str, float]]


class _LanceHandles(Protocol):
    """What the searches read of a LanceStore (its attributes, kept there so callers
    may tune ``parallel_rows`` and the like on a live store)."""

    path: Path
    ann_ef: int
    ann_nprobes: int
    ann_refine_factor: int
    bm25_prune_rows: int
    parallel_rows: int
    _meta: Meta
    _dimension: int
    _chunks_name: str
    _versions: tuple[str, Path]
    _mirror: LanceMirror | None

    def _table(self) -> AsyncTable: ...

    def _live(self) -> str: ...

    def _pinned(self, name: str, version: int) -> AsyncTable: ...


def sanitize_fts_query(text: str) -> str:
    """Words only: punctuation (quotes, colons, brackets, ``-``, ``*``, ``~``) becomes
    space, so user input can never be read as query syntax. The FTS tokenizer
    splits on punctuation anyway, so no searchable term is lost."""
    return " ".join(_NON_WORD.sub(" ", text[:MAX_QUERY_CHARS]).split())


def rows_of(search: Any) -> pa.Table | None:
    """Run a LanceDB query built by the store (None: nothing can match)."""
    return None if search is None else cast(pa.Table, run(search.to_arrow()))


def cosine_pairs(rows: pa.Table | None) -> list[tuple[str, float]]:
    """(id, cosine) from a vector query's ``id`` and ``_distance`` (cosine distance)."""
    if rows is None:
        return []
    sims = [1.0 - d for d in rows.column("_distance").to_pylist()]
    return [
        (i, s)
        for i, s in zip(rows.column("id").to_pylist(), sims, strict=True)
        if not math.isnan(s)
    ]


def score_pairs(rows: pa.Table | None) -> list[tuple[str, float]]:
    """(id, BM25 score) from a full-text query's ``id`` and ``_score``."""
    if rows is None:
        return []
    scores = rows.column("_score").to_pylist()
    return [(i, float(s)) for i, s in zip(rows.column("id").to_pylist(), scores, strict=True)]


def candidates(s: _LanceHandles, query: CandidateQuery) -> Candidates:
    """Both sides on one snapshot of the mirror (weighted: fused there by row
    position), or LanceDB's two queries concurrently; one side alone as asked."""
    q = query
    if q.vector is not None and q.text is not None:
        if q.weights is not None:
            fused, ms = weighted(s, q.vector, q.text, q.k, q.filters, q.boosts, q.weights, q.limit)
            return Candidates([], [], ms, fused)
        vector, keyword, ms = hybrid(s, q.vector, q.text, q.k, q.filters, q.boosts)
        return Candidates(vector, keyword, ms)
    return candidates_in_turn(partial(cosine_top, s), partial(bm25_top, s), q)


def cosine_top(s: _LanceHandles, query: CandidateQuery) -> Ranking:
    """Top-k (chunk id, cosine): exact, from the in-process mirror when it is on."""
    if query.vector is None:
        return []
    q, k = check_query_vector(s, query.vector), query.k
    pred = chunk_predicate(query.filters, "datafusion")
    mirrored = mirror_snapshot(s) if k > 0 else None
    if mirrored is None:
        return cosine_pairs(rows_of(vector_query(s, q, k, pred, ["id", "_distance"])))
    return mirror_vector(s, mirrored, q, k, pred)


def bm25_top(s: _LanceHandles, query: CandidateQuery) -> Ranking:
    """Top-k (chunk id, BM25 score), from the in-process mirror when it is on."""
    text, k, boosts = query.text or "", query.k, query.boosts
    pred = chunk_predicate(query.filters, "datafusion")
    mirrored = mirror_snapshot(s) if k > 0 else None
    if mirrored is None:
        search = keyword_query(s, text, k, pred, boosts, ["id", "_score"])
        return score_pairs(rows_of(search))
    return mirror_keyword(s, mirrored, text, k, pred, boosts)


def hybrid(
    s: _LanceHandles,
    query_vector: Vectors,
    query: str,
    k: int,
    filters: Filters | None,
    boosts: FieldBoosts | None,
) -> tuple[list[tuple[str, float]], list[tuple[str, float]], dict[str, float]]:
    """:func:`cosine_top` and :func:`bm25_top` in one call, with each
    one's milliseconds (``vector``, ``keyword``). On the mirror they run one after
    the other (in-process, no I/O); on LanceDB's own queries concurrently on its
    loop in one hop, so their times overlap."""
    q = check_query_vector(s, query_vector)
    pred = chunk_predicate(filters, "datafusion")
    t0 = time.perf_counter()  # a refresh of the mirror counts as vector time
    mirrored = mirror_snapshot(s) if k > 0 else None
    if mirrored is not None:
        vpairs = mirror_vector(s, mirrored, q, k, pred)
        t1 = time.perf_counter()
        kpairs = mirror_keyword(s, mirrored, query, k, pred, boosts)
        t2 = time.perf_counter()
        return vpairs, kpairs, {"vector": (t1 - t0) * 1e3, "keyword": (t2 - t1) * 1e3}
    vector = vector_query(s, q, k, pred, ["id", "_distance"])
    keyword = keyword_query(s, query, k, pred, boosts, ["id", "_score"])

    async def timed(search: Any) -> tuple[pa.Table | None, float]:
        if search is None:
            return None, 0.0
        t0 = time.perf_counter()
        rows = await search.to_arrow()
        return rows, (time.perf_counter() - t0) * 1000.0

    async def both() -> list[tuple[pa.Table | None, float]]:
        import asyncio  # only here: a search the mirror answers never loads it (≈ 0.1 CPU-s)

        return list(await asyncio.gather(timed(vector), timed(keyword)))

    (vrows, vms), (krows, kms) = run(both())
    return cosine_pairs(vrows), score_pairs(krows), {"vector": vms, "keyword": kms}


def weighted(
    s: _LanceHandles,
    query_vector: Vectors,
    query: str,
    k: int,
    filters: Filters | None,
    boosts: FieldBoosts | None,
    weights: tuple[float, float],
    limit: int | None,
) -> tuple[list[Fused], dict[str, float]]:
    """On the mirror: both searches on one snapshot, fused on row positions in
    numpy (:func:`weighted_positions`; ids only for the head); else :func:`hybrid`
    fused by id.
    On a table of ``parallel_rows`` rows or more, the vector scan runs on a worker
    thread while this one runs BM25, unless another search is in flight
    (:mod:`ragline.store.stages`); each stage then reports its own time."""
    q = check_query_vector(s, query_vector)
    pred = chunk_predicate(filters, "datafusion")
    t0 = time.perf_counter()  # a refresh of the mirror and the mask count as vector time
    snap = mirror_snapshot(s) if k > 0 else None
    if snap is None:
        vpairs, kpairs, ms = hybrid(s, q, query, k, filters, boosts)
        t1 = time.perf_counter()
        fused = weighted_pairs(vpairs, kpairs, *weights, limit=limit)
        return fused, {**ms, "fusion": (time.perf_counter() - t1) * 1e3}
    assert s._mirror is not None
    allowed = s._mirror.mask(snap, pred)  # once, before the stages split
    t1 = time.perf_counter()
    vector, keyword, vms, kms, _ = STAGES.run(
        lambda: snap.vectors.search(q, k, allowed),
        lambda: keyword_top(s, snap, query, k, allowed, boosts),
        snap.rows,
        s.parallel_rows,
    )
    t2 = time.perf_counter()
    fused = weighted_positions(vector, keyword, snap.ids, *weights, limit=limit)
    ms = {"vector": (t1 - t0) * 1e3 + vms, "keyword": kms}
    return fused, {**ms, "fusion": (time.perf_counter() - t2) * 1e3}


def mirror_snapshot(s: _LanceHandles, *, wait: bool = False) -> Snapshot | None:
    """The mirror's snapshot of the table's latest version; None when the mirror
    is off or still being built (LanceDB's own queries answer meanwhile)."""
    if s._mirror is None:
        return None
    try:
        name = s._live()
        versions = versions_dir(s)
        if s._mirror.lacks(name):
            cached = cached_snapshot(s, s._mirror, name, versions)
            if cached is not None:
                return cached

        def latest() -> int:
            return int(run(s._table().version()))

        return s._mirror.snapshot(latest, name, s._dimension, versions, wait=wait)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"{s.path}: cannot load the search indexes: {exc}") from exc


def cached_snapshot(
    s: _LanceHandles, mirror: LanceMirror, name: str, versions: Path
) -> Snapshot | None:
    """The snapshot of table ``name`` built from the search cache, when the cache
    holds the table's latest version (the first search of a new process then never
    imports LanceDB); None otherwise: no cache, an older version, a table a reader
    builds in the background, or no recorded model to vouch for its dimension."""
    if s._meta.fingerprint is None:
        return None
    stamp = settled_stamp(versions)  # before the listing, as LanceMirror.snapshot does
    version = latest_version(versions)
    if version is None:
        return None
    cached = read_rows(s.path, name, version, CHUNK_COLUMNS)
    if cached is None or cached.rows.num_rows > BACKGROUND_ROWS:
        return None
    if cached.dimension != s._dimension:
        return None
    try:
        return mirror.adopt(cached, Pinned(open_it=partial(s._pinned, name, version)), stamp)
    except Exception:  # rows this version cannot read: LanceDB's are the truth
        log.warning("%s: the search cache of %s is unreadable", s.path, name, exc_info=True)
        return None


def versions_dir(s: _LanceHandles) -> Path:
    """The chunks table's ``_versions`` folder (joined once per table name)."""
    name, path = s._versions
    if name != s._chunks_name:
        name = s._chunks_name
        path = s.path / f"{name}.lance" / "_versions"
        s._versions = (name, path)
    return path


def mirror_vector(
    s: _LanceHandles, snap: Snapshot, q: Vectors, k: int, pred: str
) -> list[tuple[str, float]]:
    assert s._mirror is not None
    allowed = s._mirror.mask(snap, pred)
    rows, sims = snap.vectors.search(q, k, allowed)
    return list(zip(snap.ids[rows].tolist(), sims.tolist(), strict=True))


def mirror_keyword(
    s: _LanceHandles,
    snap: Snapshot,
    query: str,
    k: int,
    pred: str,
    boosts: FieldBoosts | None,
) -> list[tuple[str, float]]:
    rows, scores = mirror_keyword_rows(s, snap, query, k, pred, boosts)
    return list(zip(snap.ids[rows].tolist(), scores.tolist(), strict=True))


def mirror_keyword_rows(
    s: _LanceHandles,
    snap: Snapshot,
    query: str,
    k: int,
    pred: str,
    boosts: FieldBoosts | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.floating]]:
    """The BM25 top-k as (row positions, scores), best first."""
    assert s._mirror is not None
    return keyword_top(s, snap, query, k, s._mirror.mask(snap, pred), boosts)


def keyword_top(
    s: _LanceHandles,
    snap: Snapshot,
    query: str,
    k: int,
    allowed: npt.NDArray[np.bool_] | None,
    boosts: FieldBoosts | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.floating]]:
    """The BM25 top-k among ``allowed`` rows (all when None) as (row positions,
    scores), best first."""
    b = boosts or FieldBoosts()
    # the raw query: the analyser splits on punctuation itself, and the language
    # is detected on what the user wrote ("¿Cómo …?" reads as Spanish, not without ¿?)
    counts = query_counts(query[:MAX_QUERY_CHARS])
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    # the exhaustive scorer's top-k (filters applied before it), with most postings
    # of a big index skipped (MaxScore, store/keyword_index.py)
    rows, scores = snap.keywords.top(
        counts, (b.title, b.headings, b.text), k, allowed, s.bm25_prune_rows
    )
    return rows, scores


# -- LanceDB's own queries


def check_query_vector(s: _LanceHandles, query: Vectors) -> Vectors:
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != s._dimension:
        raise StoreError(
            f"query vector has dimension {q.shape[0]} but the index stores {s._dimension}"
        )
    if not np.isfinite(q).all():
        raise StoreError("query vector contains NaN or infinite values")
    return q


def vector_query(s: _LanceHandles, q: Vectors, k: int, pred: str, columns: list[str]) -> Any:
    """The LanceDB vector query (not run), or None when nothing can match."""
    if k <= 0:
        return None
    table = s._table()
    search = (
        table.query()
        .nearest_to(q)
        .column("vector")
        .distance_type("cosine")
        .select(columns)
        .limit(k)
    )
    plan = s._meta.vector_index  # what the last optimize() built (meta is fresh)
    if plan is not None and plan.kind == "exact":
        search = search.nprobes(max(plan.partitions, s.ann_nprobes))  # all of them
    elif plan is not None:
        search = search.nprobes(s.ann_nprobes).refine_factor(s.ann_refine_factor).ef(s.ann_ef)
    if pred:
        search = search.where(pred)  # a pre-filter unless .postfilter() is asked for
    return search


def keyword_query(
    s: _LanceHandles,
    query: str,
    k: int,
    pred: str,
    boosts: FieldBoosts | None,
    columns: list[str],
) -> Any:
    """The LanceDB full-text query (not run), or None when nothing can match."""
    if k <= 0:
        return None
    text = sanitize_fts_query(query)
    if not text:
        return None
    b = boosts or FieldBoosts()
    weighted = [
        (f, w) for f, w in zip(KEYWORD_FIELDS, (b.title, b.headings, b.text), strict=True) if w > 0
    ]
    if not weighted:
        return None
    from lancedb.query import FullTextOperator, MultiMatchQuery

    fts = MultiMatchQuery(
        text,
        [f for f, _ in weighted],
        boosts=[float(w) for _, w in weighted],
        operator=FullTextOperator.OR,
    )
    search = s._table().query().nearest_to_text(fts).select(columns).limit(k)
    if pred:
        search = search.where(pred)
    return search


# -- rows of the final hits


def chunks_with_vectors(s: _LanceHandles, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
    """Stored chunks with each chunk's stored vector, in the same read: on the
    mirror (:meth:`LanceMirror.chunk_rows`), else by LanceDB's ``id IN (…)`` scan."""
    snap = mirror_snapshot(s) if ids else None
    if snap is not None:
        assert s._mirror is not None
        at = positions_of(snap, ids)
        chunks, _, vecs = s._mirror.chunk_rows(snap, at, vectors=True)
        assert vecs is not None
        return {c.id: (c, v) for c, v in zip(chunks, vecs, strict=True)}
    if not ids:
        return {}
    unique = list(dict.fromkeys(ids))
    query = s._table().query().where(sql_in_list("id", unique))
    rows = run(query.select([*CHUNK_COLUMNS, "vector"]).to_arrow())
    vecs = arrow_vectors(rows, s._dimension)
    return {c.id: (c, v) for c, v in zip(arrow_to_chunks(rows), vecs, strict=True)}


def vectors_for(s: _LanceHandles, ids: Sequence[str]) -> dict[str, Vectors]:
    """Stored vectors by id, without their chunks: the mirror's float32 rows when it
    keeps them (a relevance threshold asks this for every keyword-only candidate,
    and reading whole rows made that search 1.5x slower), else LanceDB's
    ``id IN (…)`` scan of the vector column."""
    if not ids:
        return {}
    snap = mirror_snapshot(s)
    if snap is not None and snap.vectors.matrix is not None:
        at = positions_of(snap, ids)
        return dict(zip(snap.ids[at].tolist(), snap.vectors.raw(at), strict=True))
    unique = list(dict.fromkeys(ids))
    query = s._table().query().where(sql_in_list("id", unique)).select(["id", "vector"])
    rows = run(query.to_arrow())
    vecs = arrow_vectors(rows, s._dimension)
    return dict(zip(rows.column("id").to_pylist(), vecs, strict=True))


def chunks_by_index(s: _LanceHandles, doc_id: str, wanted: list[int] | None) -> list[Chunk] | None:
    """A document's chunks at the ``wanted`` positions (all when None), in order, from
    the mirror's held columns (the neighbours an answer adds around each hit, without
    a LanceDB query per hit); None when the mirror cannot say (off, being built, or
    not holding those columns): LanceDB answers."""
    snap = mirror_snapshot(s)
    if snap is None or snap.held is None or s._mirror is None:
        return None
    found = snap.held.equal_to("doc_id", doc_id)
    index = snap.held.columns.get("chunk_index")
    if found is None or index is None or index.coded or index.valid is not None:
        return None
    if wanted is not None:
        found &= np.isin(index.data, np.asarray(wanted, dtype=index.data.dtype))
    chunks, _, _ = s._mirror.chunk_rows(snap, np.flatnonzero(found).astype(np.int64))
    return sorted(chunks, key=lambda c: c.chunk_index)


def positions_of(snap: Snapshot, ids: Sequence[str]) -> IntArray:
    """Positions in ``snap`` of the distinct ``ids`` it has, in first-seen order."""
    where = snap.position
    return np.asarray([where[i] for i in dict.fromkeys(ids) if i in where], np.int64)
