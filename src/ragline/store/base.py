"""The Store protocol: everything retrieval and sync need from an index.

LanceDB (embedded), PostgreSQL + pgvector and Qdrant implement the same calls,
so retrieval and sync code never know which one they talk to.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.errors import FaultError
from ragline.fusion import weighted_pairs
from ragline.types import Chunk, DocumentRecord, FieldBoosts, Filters, Fused


class StoreError(FaultError):
    """The store could not do what was asked (I/O, corrupt index, bad filter)."""


class ModelMismatchError(StoreError):
    """The index was built with another embedding model than the one configured."""

    def __init__(self, stored: ModelFingerprint, configured: ModelFingerprint) -> None:
        super().__init__(
            f"index was built with model {stored.name!r} (dim {stored.dimension}, "
            f"sha256 {stored.digest[:12]}…) but the configured model is {configured.name!r} "
            f"(dim {configured.dimension}, sha256 {configured.digest[:12]}…); "
            "run `ragline reindex` to re-embed the stored chunks with the new model"
        )
        self.stored = stored
        self.configured = configured


#: Columns a Chunk is stored in and rebuilt from, in field order (no vector,
#: no derived ``headings``); every store keeps the same ones.
CHUNK_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Chunk))
#: Columns of a document record, in field order.
DOCUMENT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(DocumentRecord))


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """Chunk metadata as stored JSON text (default=str: YAML front matter may hold
    dates; they come back as strings)."""
    return json.dumps(metadata, sort_keys=True, default=str) if metadata else "{}"


def chunk_from_row(row: Sequence[Any]) -> Chunk:
    """A Chunk from its stored values in :data:`CHUNK_COLUMNS` order.

    ``heading_path`` may be any sequence or None; ``metadata`` JSON text (LanceDB,
    Qdrant), a mapping (PostgreSQL jsonb) or None."""
    (
        id_,
        doc_id,
        tenant,
        source,
        title,
        chapter,
        section,
        heading_path,
        url,
        anchor,
        chunk_index,
        start_char,
        end_char,
        token_count,
        word_count,
        has_code,
        has_equations,
        content_hash,
        created_at,
        text,
        page,
        metadata,
    ) = row
    meta: Any
    if isinstance(metadata, str):
        try:
            meta = json.loads(metadata) if metadata and metadata != "{}" else {}
        except ValueError:
            meta = metadata  # kept as text: chunk_problem names the field
    elif isinstance(metadata, Mapping) or metadata is None:
        meta = dict(metadata or {})
    else:
        meta = metadata
    return Chunk(
        id=id_,
        doc_id=doc_id,
        tenant=tenant,
        source=source,
        title=title,
        chapter=chapter,
        section=section,
        heading_path=tuple(heading_path or ()),
        url=url,
        anchor=anchor,
        chunk_index=chunk_index,
        start_char=start_char,
        end_char=end_char,
        token_count=token_count,
        word_count=word_count,
        has_code=has_code,
        has_equations=has_equations,
        content_hash=content_hash,
        created_at=created_at,
        text=text,
        page=page,
        metadata=meta,
    )


_TEXT_FIELDS = (
    "id", "doc_id", "tenant", "source", "title", "chapter", "section", "url", "anchor",
    "content_hash", "created_at", "text",
)  # fmt: skip
_INT_FIELDS = ("chunk_index", "start_char", "end_char", "token_count", "word_count")


def chunk_problem(chunk: Chunk) -> str | None:
    """What is wrong with a stored chunk (a field missing or of the wrong type, as
    after a crash or a hand edit), or None when it is sound. Such a chunk is left
    out of answers rather than failing every request that retrieves it."""
    for name in _TEXT_FIELDS:
        value = getattr(chunk, name)
        if not isinstance(value, str):
            return f"field {name} is {_kind(value)}, not text"
    for name in _INT_FIELDS:
        value = getattr(chunk, name)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"field {name} is {_kind(value)}, not an integer"
    for name in ("has_code", "has_equations"):
        if not isinstance(getattr(chunk, name), bool):
            return f"field {name} is {_kind(getattr(chunk, name))}, not true/false"
    if chunk.page is not None and (not isinstance(chunk.page, int) or isinstance(chunk.page, bool)):
        return f"field page is {_kind(chunk.page)}, not an integer"
    if not all(isinstance(h, str) for h in chunk.heading_path):
        return "field heading_path holds a value that is not text"
    if not isinstance(chunk.metadata, dict):
        return f"field metadata is {_kind(chunk.metadata)}, not a JSON object"
    return None


def _kind(value: object) -> str:
    return "missing" if value is None else f"a {type(value).__name__}"


class MalformedChunks:
    """Stored chunks found malformed in this process (id → problem), for the log,
    ``/metrics`` and ``ragline status``; thread-safe."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}
        self._lock = threading.Lock()

    def note(self, chunk_id: str, problem: str) -> bool:
        """Record one; True the first time this id is seen (log it once)."""
        with self._lock:
            new = chunk_id not in self._seen
            self._seen[chunk_id] = problem
            return new

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._seen)

    def forget(self, chunk_ids: Iterable[str]) -> None:
        """Drop chunks that were repaired (their file ingested again)."""
        with self._lock:
            for chunk_id in chunk_ids:
                self._seen.pop(chunk_id, None)


#: The process's record of malformed chunks (every store, every engine).
MALFORMED_CHUNKS = MalformedChunks()


def check_model(store: Store, configured: ModelFingerprint, *, record: bool = False) -> None:
    """Refuse to mix vectors of two models; with ``record``, an empty index adopts
    the configured model (first ingest)."""
    stored = store.fingerprint()
    if stored is None:
        if record:
            store.fingerprint(configured)
    elif stored != configured:
        raise ModelMismatchError(stored, configured)


def positions(indices: Sequence[int] | None) -> list[int] | None:
    """The chunk positions of :meth:`Store.chunks_by_index`, sorted and unique;
    None (every position) stays None."""
    return None if indices is None else sorted({int(i) for i in indices})


def listing_order(records: Iterable[DocumentRecord]) -> list[DocumentRecord]:
    """The documents as :meth:`Store.documents` lists them on every store: by
    tenant, then source, then id."""
    return sorted(records, key=lambda r: (r.tenant, r.source, r.doc_id))


def record_or_read(
    new: ModelFingerprint | None,
    record: Callable[[ModelFingerprint], None],
    read: Callable[[], ModelFingerprint | None],
) -> ModelFingerprint | None:
    """:meth:`Store.fingerprint` from a store's own write and read of it."""
    if new is None:
        return read()
    record(new)
    return new


def takes_new_dimension(
    fingerprint: ModelFingerprint, stored_dimension: int, count_chunks: Callable[[], int]
) -> bool:
    """Whether recording ``fingerprint`` needs the index rebuilt for its dimension: true
    for an empty index of another dimension; a non-empty one refuses (its vectors
    would mix two models). ``count_chunks`` is asked only when the dimensions differ."""
    if fingerprint.dimension == stored_dimension:
        return False
    if count_chunks() == 0:
        return True
    raise StoreError(
        f"model {fingerprint.name!r} makes {fingerprint.dimension}-dim vectors but "
        f"the index stores {stored_dimension}-dim ones; use rebuild() to change models"
    )


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """One document's new state: its record, chunks and their vectors (row i ↔ chunk i)."""

    record: DocumentRecord
    chunks: Sequence[Chunk]
    vectors: Vectors


def check_vectors(vectors: Any, rows: int, dimension: int, what: str) -> Vectors:
    """``vectors`` as a (rows, dimension) finite float32 matrix, or StoreError saying why."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != rows:
        raise StoreError(f"{what}: expected {rows} vectors, got array of shape {arr.shape}")
    if arr.shape[1] != dimension:
        raise StoreError(
            f"{what}: vectors have dimension {arr.shape[1]} but the index stores {dimension}; "
            "run `ragline reindex` after changing the embedding model"
        )
    if rows and not np.isfinite(arr).all():
        raise StoreError(f"{what}: vectors contain NaN or infinite values")
    return arr


def check_writes(items: Sequence[DocumentWrite], dimension: int) -> list[Vectors]:
    """Each item's vectors as a checked float32 matrix, or StoreError naming the document.

    Every store refuses the same bad batches with the same words: a document
    twice in one batch, a chunk of another document or tenant, a chunk id used
    twice, vectors of the wrong shape or with NaN/inf. Checked before anything is
    written, so a bad batch leaves the index untouched.
    """
    doc_ids: set[str] = set()
    chunk_ids: set[str] = set()
    checked: list[Vectors] = []
    for item in items:
        record = item.record
        what = f"document {record.doc_id!r} ({record.source})"
        if record.doc_id in doc_ids:
            raise StoreError(f"{what}: the document appears twice in one batch")
        doc_ids.add(record.doc_id)
        for c in item.chunks:
            if c.doc_id != record.doc_id or c.tenant != record.tenant:
                raise StoreError(
                    f"{what}: chunk {c.id!r} belongs to document {c.doc_id!r} "
                    f"of tenant {c.tenant!r}"
                )
            if c.id in chunk_ids:
                raise StoreError(f"{what}: duplicate chunk id {c.id!r}")
            chunk_ids.add(c.id)
        try:
            checked.append(check_vectors(item.vectors, len(item.chunks), dimension, "chunks"))
        except StoreError as exc:
            raise StoreError(f"{what}: {exc}") from exc
    return checked


#: A ranking by id: (chunk id, score) pairs, best first.
Ranking = list[tuple[str, float]]


@dataclass(frozen=True, slots=True)
class CandidateQuery:
    """One candidate search: the cosine side when ``vector`` is set, the BM25 side
    when ``text`` is, both for hybrid. ``weights`` (vector, keyword) asks the store to
    fuse the two by weighted min-max (:func:`~ragline.fusion.weighted_pairs`) and keep
    the first ``limit`` (all when None)."""

    k: int
    vector: Vectors | None = None
    text: str | None = None
    filters: Filters | None = None
    boosts: FieldBoosts | None = None
    weights: tuple[float, float] | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Candidates:
    """What :meth:`Store.candidates` found: each side's (id, score) ranking, best
    first (empty for a side not asked, and may be empty when the store fused them
    itself), the fused list when weights were given, and the milliseconds of
    ``vector``, ``keyword`` (and ``fusion``); the two searches' times may overlap
    when the store runs them concurrently."""

    vector: Ranking
    keyword: Ranking
    ms: dict[str, float]
    fused: list[Fused] | None = None


#: A store's top-k of one side of a :class:`CandidateQuery` (its cosine side reads
#: ``vector``, its BM25 side ``text`` and ``boosts``; both ``k`` and ``filters``).
SideTop = Callable[[CandidateQuery], Ranking]


def candidates_in_turn(
    vector_top: SideTop, keyword_top: SideTop, query: CandidateQuery
) -> Candidates:
    """:meth:`Store.candidates` from a store's cosine and BM25 top-k calls: the asked
    searches one after the other, each timed, fused in Python by id when asked. A
    side is called only when the query sets it (``vector`` or ``text`` not None)."""
    ms: dict[str, float] = {}
    vector: Ranking = []
    keyword: Ranking = []
    t0 = time.perf_counter()
    if query.vector is not None:
        vector = vector_top(query)
        ms["vector"] = (time.perf_counter() - t0) * 1e3
    t1 = time.perf_counter()
    if query.text is not None:
        keyword = keyword_top(query)
        ms["keyword"] = (time.perf_counter() - t1) * 1e3
    if query.weights is None:
        return Candidates(vector, keyword, ms)
    t2 = time.perf_counter()
    fused = weighted_pairs(vector, keyword, *query.weights, limit=query.limit)
    ms["fusion"] = (time.perf_counter() - t2) * 1e3
    return Candidates(vector, keyword, ms, fused)


#: Graph expansion in one query: (hit ids, window, same section, section span) →
#: hit id → chunks of its document up to ``window`` positions away, and (same
#: section) those of its section up to ``span`` positions away.
RelatedChunks = Callable[[Sequence[str], int, bool, int], dict[str, list[Chunk]]]


@dataclass(frozen=True, slots=True)
class StoreAbilities:
    """What a store does beyond the protocol, declared once when it is opened, so
    callers read a field instead of probing the store's type on every call.

    ``vectors``: stored vectors by id without reading their chunks, where that is
    cheaper than :meth:`Store.chunks_with_vectors` (a relevance threshold reads the
    vectors of every keyword-only candidate). ``related_chunks``: graph expansion in
    one query (FalkorDB walks NEXT_CHUNK);
    without it the retriever reads neighbours by position. ``warm_up``: build the
    in-process search indexes now (servers, benchmarks), else the first search
    does. ``describe``: how the index searches (kind, parameters, sizes), for
    evaluation reports."""

    vectors: Callable[[Sequence[str]], dict[str, Vectors]] | None = None
    related_chunks: RelatedChunks | None = None
    warm_up: Callable[[], None] | None = None
    describe: Callable[[], dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """What :meth:`Store.info` reports: ``chunks`` stored (under the filters asked)
    and the vector ``dimension`` of the index."""

    chunks: int
    dimension: int


@runtime_checkable
class Store(Protocol):
    """An index of chunks with their vectors, searchable by vector and by BM25.

    Search is two steps, so retrieval fuses and cuts on ids and scores and reads
    whole chunks only for the hits it returns:

    1. :meth:`candidates`: (chunk id, score) rankings by cosine and by BM25 (the
       scores of :mod:`ragline.text.bm25`), one or both, optionally fused;
    2. rows: :meth:`chunks_with_vectors` for the ids that are kept.

    Filters are equality tests on chunk metadata (``tenant``, ``chapter``,
    ``has_code``, ``doc_id``, any column of ``filters.CHUNK_FILTER_FIELDS``); a store
    applies them before its top-k (never post-filters), so top-k stays exact under
    a filter.

    Writing a store (docs/stores.md): implement these eight calls and
    :class:`StoreMaintenance`, and declare :class:`StoreAbilities`
    (:func:`candidates_in_turn` builds :meth:`candidates` from a cosine and a BM25
    top-k; LanceStore instead runs both on one snapshot and fuses them there by row
    position). Conveniences (:func:`ragline.store.reads.vector_search`, stored
    vectors by id or by document …) are functions over this protocol, not methods.
    ``tests/store/contract.py`` registers the store for the contract suite, which
    every store must pass unchanged.
    """

    #: What the store does beyond these calls, fixed when it is opened.
    abilities: StoreAbilities

    # -- write: what the indexer needs to sync a folder

    def fingerprint(self, new: ModelFingerprint | None = None) -> ModelFingerprint | None:
        """The model the index was built with (None for an empty index); with
        ``new``, record that model first (first ingest, after a reindex)."""
        ...

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        """Every ingested file (of one tenant, or all)."""
        ...

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        """Make each item's chunks the only chunks of its document, then record
        the documents.

        The chunk swap of the whole batch is ONE atomic commit (readers and a
        crash see the old or the new chunks, never a mix or duplicates; batching
        several small files per commit keeps ingestion bound by embedding speed).
        The document records are written after it, so a crash in between leaves
        those files looking unsynced and the next run redoes them idempotently.
        """
        ...

    def delete_document(self, doc_id: str) -> None:
        """Remove a document's chunks (vector and keyword side) and its record."""
        ...

    # -- read: what the retriever needs to answer a search

    def candidates(self, query: CandidateQuery) -> Candidates:
        """The cosine and/or BM25 candidates ``query`` asks for, each search timed;
        fused by weighted min-max in the store when ``query.weights`` is set (a store
        that keeps both indexes in one snapshot fuses there by row position; any other
        calls :func:`candidates_in_turn`)."""
        ...

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        """id → (stored chunk, its stored vector) in one read; ids no longer stored
        are absent (a hit deleted since its search is dropped, never shown)."""
        ...

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        """A document's chunks at the given positions (neighbour expansion), or all
        of them (None), in position order."""
        ...

    def info(self, filters: Filters | None = None) -> StoreInfo:
        """How many chunks it holds (under ``filters``) and of which dimension."""
        ...


@runtime_checkable
class StoreMaintenance(Protocol):
    """What compaction, reindex, migration and shutdown need besides :class:`Store`
    (kept apart so searching and syncing see only the eight calls above)."""

    def optimize(self) -> None:
        """Compact, refresh indexes: called once after a batch of writes."""
        ...

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        """Every chunk with its vector, in batches (reindex, migrate)."""
        ...

    def rebuild(
        self,
        fingerprint: ModelFingerprint,
        batches: Iterable[tuple[list[Chunk], Vectors]],
    ) -> int:
        """Write every chunk again with new vectors (reindex with another model,
        possibly another dimension) into a fresh index, then swap it in: the old
        index serves until the new one is complete. Returns the chunk count."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class IndexStore(Store, StoreMaintenance, Protocol):
    """A store as :func:`ragline.store.factory.open_store` returns it: searchable,
    syncable and maintainable (every backend implements both protocols)."""


class ClosesOnExit:
    """``with store:`` closes the store at the end (mixed into every store)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
