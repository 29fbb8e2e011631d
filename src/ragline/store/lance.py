"""LanceStore: the embedded default index, one folder on disk, no server.

Layout of the folder::

    meta.json          format, name of the live chunks table, model fingerprint
    chunks.lance/      one row per Chunk (every field a column, plus vector)
    documents.lance/   one row per ingested file (DocumentRecord)

Why it is built the way it is:

* Atomic document swaps. ``replace_documents`` is ONE LanceDB ``merge_insert``
  commit for a whole batch of documents (upsert by chunk id + delete those
  documents' other chunks), so a reader, or a ``kill -9`` mid-write, sees the
  old chunk sets or the new ones, never both or half. The document records are
  written after it.
* Exact, then approximate. ``optimize()`` keeps the vector index matched to the
  table's size (``plan_vector_index``): none below 4,096 rows (a scan takes a
  few ms); below ``ann_min_rows`` an IVF_FLAT index searched in every partition,
  which returns the exhaustive top-k 5–10× faster than LanceDB's plain scan;
  from ``ann_min_rows`` on an IVF_SQ index (cosine). IVF_SQ won on 100k × 384
  (2 cores): built in ~3 s where IVF_HNSW_SQ took ~130 s and IVF_PQ ~60 s, and
  gave recall@10 0.975 (1.0 with refine) where HNSW_SQ needed ef=200 for 0.96.
  ANN queries probe ``ann_nprobes`` partitions and re-rank
  ``ann_refine_factor`` × k candidates at full precision, so ``vector_score``
  is the exact cosine. An index is retrained once the table has grown 4×.
* BM25 is LanceDB's native full-text index (English stemming and stop words) on
  ``title``, ``headings`` and ``text``, queried with one ``MultiMatchQuery`` that
  carries the field boosts. Rows written since the last ``optimize()`` are not in
  the index yet, but LanceDB searches them exhaustively, so a write is
  searchable at once; ``optimize()`` folds them into the index. Deleted rows
  vanish from both searches at once (deletion vectors).
* Filters are SQL predicates (``ragline.store.filters``) applied as pre-filters,
  so top-k under a filter is exact.
* Readers never go stale: the connection uses ``read_consistency_interval=0``
  (every read checks for a newer table version, a cheap manifest lookup), and
  ``meta.json`` is re-read whenever its inode or mtime changes, so a long-lived
  reader follows writes and ``rebuild`` swaps made by other processes.
* ``rebuild`` writes a new table (``chunks_<n>``), indexes it, then points
  ``meta.json`` at it (temp file + ``os.replace``), so a crash mid-rebuild
  leaves the old table serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import lancedb
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from lancedb.background_loop import LOOP
from lancedb.db import AsyncConnection
from lancedb.index import FTS, Bitmap, BTree, IvfFlat, IvfSq
from lancedb.query import FullTextOperator, MultiMatchQuery
from lancedb.table import AsyncTable

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.fusion import weighted_pairs, weighted_positions
from ragline.store.arrow import arrow_to_chunks, arrow_vectors
from ragline.store.base import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    CandidateQuery,
    Candidates,
    ClosesOnExit,
    DocumentWrite,
    StoreAbilities,
    StoreError,
    StoreInfo,
    candidates_in_turn,
    check_vectors,
    check_writes,
    metadata_json,
    positions,
    record_or_read,
    takes_new_dimension,
)
from ragline.store.filter_sql import chunk_predicate
from ragline.store.filters import (
    DOCUMENT_FILTER_FIELDS,
    and_predicates,
    sql_in_list,
    sql_literal,
    to_sql_predicate,
)
from ragline.store.keyword_index import PRUNE_MIN_ROWS
from ragline.store.lance_memory import LanceMirror, Snapshot
from ragline.store.stages import PARALLEL_MIN_ROWS, STAGES
from ragline.store.vector_index import IntArray
from ragline.text.bm25 import query_counts
from ragline.types import Chunk, DocumentRecord, FieldBoosts, Filters, Fused

T = TypeVar("T")

FORMAT_VERSION = 1
META_FILE = "meta.json"
CHUNKS_TABLE = "chunks"
DOCUMENTS_TABLE = "documents"
VECTOR_INDEX = "vector_idx"

#: BM25 fields, in the order boosts are given.
KEYWORD_FIELDS = ("title", "headings", "text")
#: Scalar indexes that make the common filters and the id/doc_id lookups cheap.
_SCALAR_INDEXES: dict[str, BTree | Bitmap] = {
    "id": BTree(),
    "doc_id": BTree(),
    "tenant": Bitmap(),
    "chapter": Bitmap(),
}
_FTS_CONFIG = FTS(
    base_tokenizer="simple",
    language="English",
    lower_case=True,
    stem=True,
    remove_stop_words=True,
    ascii_folding=True,
    with_position=False,
)
#: Below this many rows a plain exhaustive scan is fast enough (~4 ms): no vector index.
MIN_VECTOR_INDEX_ROWS = 4096
#: Rows per IVF partition the indexes are trained for (LanceDB's own default).
_ROWS_PER_PARTITION = 8192
#: Retrain a vector index once the table is this many times the trained size…
_RETRAIN_GROWTH = 4
#: …or once optimize() has appended this many delta segments to it (each one is
#: searched separately: 8 deltas cost ~20% latency at 100k rows).
_MAX_INDEX_SEGMENTS = 8
#: optimize() deletes table versions older than this (readers use the latest).
_CLEANUP_AFTER = timedelta(minutes=1)
#: Longest keyword query kept, in characters (BM25 over a whole page is noise).
_MAX_QUERY_CHARS = 2000
#: Tries to open a fresh index when another process is creating it at the same time.
_OPEN_ATTEMPTS = 6

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)


def chunk_schema(dimension: int) -> pa.Schema:
    """Arrow schema of a chunks table: one column per Chunk field, plus the
    BM25 ``headings`` string and the ``vector``."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("tenant", pa.string(), nullable=False),
            pa.field("source", pa.string()),
            pa.field("title", pa.string()),
            pa.field("chapter", pa.string()),
            pa.field("section", pa.string()),
            pa.field("heading_path", pa.list_(pa.string())),
            pa.field("headings", pa.string()),
            pa.field("url", pa.string()),
            pa.field("anchor", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("start_char", pa.int64()),
            pa.field("end_char", pa.int64()),
            pa.field("token_count", pa.int32()),
            pa.field("word_count", pa.int32()),
            pa.field("has_code", pa.bool_()),
            pa.field("has_equations", pa.bool_()),
            pa.field("content_hash", pa.string()),
            pa.field("created_at", pa.string()),
            pa.field("text", pa.string()),
            pa.field("page", pa.int32(), nullable=True),
            pa.field("metadata", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("tenant", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("file_hash", pa.string()),
        pa.field("chunk_count", pa.int64()),
        pa.field("token_count", pa.int64()),
        pa.field("chapter", pa.string()),
        pa.field("title", pa.string()),
        pa.field("format", pa.string()),
        pa.field("ingested_at", pa.string()),
    ]
)


# --------------------------------------------------------------------------- pure


def sanitize_fts_query(text: str) -> str:
    """Words only: punctuation (quotes, colons, brackets, ``-``, ``*``, ``~``) becomes
    space, so user input can never be read as query syntax. The FTS tokenizer
    splits on punctuation anyway, so no searchable term is lost."""
    return " ".join(_NON_WORD.sub(" ", text[:_MAX_QUERY_CHARS]).split())


def _vector_array(vectors: Vectors, dimension: int) -> pa.FixedSizeListArray:
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, dimension)


def chunks_to_arrow(chunks: Sequence[Chunk], vectors: Vectors, dimension: int) -> pa.Table:
    """Chunks and their vectors as rows of :func:`chunk_schema`."""
    vecs = check_vectors(vectors, len(chunks), dimension, "chunks")
    columns: dict[str, Any] = {
        "id": [c.id for c in chunks],
        "doc_id": [c.doc_id for c in chunks],
        "tenant": [c.tenant for c in chunks],
        "source": [c.source for c in chunks],
        "title": [c.title for c in chunks],
        "chapter": [c.chapter for c in chunks],
        "section": [c.section for c in chunks],
        "heading_path": [list(c.heading_path) for c in chunks],
        "headings": [" > ".join(h for h in c.heading_path if h) for c in chunks],
        "url": [c.url for c in chunks],
        "anchor": [c.anchor for c in chunks],
        "chunk_index": [c.chunk_index for c in chunks],
        "start_char": [c.start_char for c in chunks],
        "end_char": [c.end_char for c in chunks],
        "token_count": [c.token_count for c in chunks],
        "word_count": [c.word_count for c in chunks],
        "has_code": [c.has_code for c in chunks],
        "has_equations": [c.has_equations for c in chunks],
        "content_hash": [c.content_hash for c in chunks],
        "created_at": [c.created_at for c in chunks],
        "text": [c.text for c in chunks],
        "page": [c.page for c in chunks],
        "metadata": [metadata_json(c.metadata) for c in chunks],
    }
    schema = chunk_schema(dimension)
    arrays = [pa.array(columns[f.name], f.type) for f in schema if f.name != "vector"]
    arrays.append(_vector_array(vecs, dimension))
    return pa.Table.from_arrays(arrays, schema=schema)


def _document_to_row(record: DocumentRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in DOCUMENT_COLUMNS}


def _rows_to_documents(table: pa.Table) -> list[DocumentRecord]:
    return [DocumentRecord(**row) for row in table.select(list(DOCUMENT_COLUMNS)).to_pylist()]


# ------------------------------------------------------------------- vector index

VectorIndexKind = Literal["exact", "ann"]


@dataclass(frozen=True, slots=True)
class VectorIndexPlan:
    """The vector index a table has (or should have).

    ``exact``: IVF_FLAT, every partition probed, so results are the exhaustive
    top-k, only 5–10× faster than LanceDB's plain scan (20k rows: 3 ms vs 16 ms;
    50k: 12 ms vs 120 ms on 2 busy cores). ``ann``: IVF_SQ, ``ann_nprobes``
    partitions probed and candidates re-ranked at full precision.
    """

    kind: VectorIndexKind
    rows: int  # table rows when it was trained
    partitions: int

    def to_dict(self) -> dict[str, str | int]:
        return {"kind": self.kind, "rows": self.rows, "partitions": self.partitions}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VectorIndexPlan:
        kind = d["kind"]
        if kind not in ("exact", "ann"):
            raise ValueError(f"unknown vector index kind {kind!r}")
        return cls(kind=kind, rows=int(d["rows"]), partitions=int(d["partitions"]))


def plan_vector_index(
    rows: int, current: VectorIndexPlan | None, ann_min_rows: int, segments: int = 1
) -> VectorIndexPlan | None:
    """The vector index a table of ``rows`` rows should have: none while a scan is
    cheap, an exact one below ``ann_min_rows``, an approximate one from there on;
    retrained when the table has grown ``_RETRAIN_GROWTH``× since training or the
    index has more than ``_MAX_INDEX_SEGMENTS`` segments (``segments``).
    Returns ``current`` itself when it is still right."""
    if rows < MIN_VECTOR_INDEX_ROWS:
        # An exact index may stay (still exact); an approximate one may not.
        return current if current is not None and current.kind == "exact" else None
    kind: VectorIndexKind = "ann" if rows >= ann_min_rows else "exact"
    if (
        current is not None
        and current.kind == kind
        and rows < _RETRAIN_GROWTH * current.rows
        and segments <= _MAX_INDEX_SEGMENTS
    ):
        return current
    return VectorIndexPlan(kind, rows, max(1, math.ceil(rows / _ROWS_PER_PARTITION)))


# ----------------------------------------------------------------------- meta.json


@dataclass(frozen=True, slots=True)
class _Meta:
    chunks_table: str = CHUNKS_TABLE
    generation: int = 0
    fingerprint: ModelFingerprint | None = None
    vector_index: VectorIndexPlan | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT_VERSION,
                "chunks_table": self.chunks_table,
                "generation": self.generation,
                "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
                "vector_index": self.vector_index.to_dict() if self.vector_index else None,
            },
            indent=2,
        )

    @classmethod
    def from_file(cls, path: Path) -> _Meta:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT_VERSION:
                raise StoreError(
                    f"{path}: index format {data.get('format')!r} is not supported "
                    f"(this ragline reads format {FORMAT_VERSION})"
                )
            fp = data.get("fingerprint")
            vi = data.get("vector_index")
            return cls(
                chunks_table=str(data["chunks_table"]),
                generation=int(data["generation"]),
                fingerprint=ModelFingerprint.from_dict(fp) if fp else None,
                vector_index=VectorIndexPlan.from_dict(vi) if vi else None,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{path}: cannot read index metadata: {exc}") from exc


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temp file + fsync + os.replace: readers see the old or new file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every platform can fsync a directory
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _rows(search: Any) -> pa.Table | None:
    """Run a LanceDB query built by the store (None: nothing can match)."""
    return None if search is None else cast(pa.Table, _run(search.to_arrow()))


def _cosine_pairs(rows: pa.Table | None) -> list[tuple[str, float]]:
    """(id, cosine) from a vector query's ``id`` and ``_distance`` (cosine distance)."""
    if rows is None:
        return []
    sims = [1.0 - d for d in rows.column("_distance").to_pylist()]
    return [
        (i, s)
        for i, s in zip(rows.column("id").to_pylist(), sims, strict=True)
        if not math.isnan(s)
    ]


def _score_pairs(rows: pa.Table | None) -> list[tuple[str, float]]:
    """(id, BM25 score) from a full-text query's ``id`` and ``_score``."""
    if rows is None:
        return []
    scores = rows.column("_score").to_pylist()
    return [(i, float(s)) for i, s in zip(rows.column("id").to_pylist(), scores, strict=True)]


# --------------------------------------------------------------------------- store


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on LanceDB's background loop; its errors become StoreError.

    Each public call builds one coroutine, so it crosses into LanceDB's event loop
    once: the sync ``lancedb.Table`` wrapper makes several hops per query (≈ 2 ms
    of the ~6 ms a 20k-row keyword search took through it).
    """
    try:
        return cast(T, LOOP.run(coro))  # type: ignore[no-untyped-call]
    except (StoreError, StopAsyncIteration):
        raise
    except Exception as exc:
        raise StoreError(f"LanceDB: {exc}") from exc


def _racing_creation(exc: StoreError) -> bool:
    """Whether opening a fresh index failed only because another process is creating
    the same tables at this moment."""
    text = str(exc).lower()
    return "conflict" in text or "was not found" in text


async def _open_or_create(db: AsyncConnection, name: str, schema: pa.Schema) -> AsyncTable:
    if name in await _table_names(db):
        return await db.open_table(name)
    return await db.create_table(name, schema=schema, exist_ok=True)


async def _table_names(db: AsyncConnection) -> set[str]:
    return set((await db.list_tables()).tables)


async def _table_dimension(table: AsyncTable) -> int:
    field_type = (await table.schema()).field("vector").type
    return int(cast(pa.FixedSizeListType, field_type).list_size)


async def _index_names(table: AsyncTable) -> set[str]:
    return {ix.name for ix in await table.list_indices()}


async def _ensure_indexes(table: AsyncTable) -> None:
    """Create the scalar and full-text indexes a table lacks (instant on an empty table)."""
    present = await _index_names(table)
    for column, config in _SCALAR_INDEXES.items():
        if f"{column}_idx" not in present:
            await table.create_index(column, config=config)
    for column in KEYWORD_FIELDS:
        if f"{column}_idx" not in present:
            await table.create_index(column, config=_FTS_CONFIG)


async def _apply_vector_index(
    table: AsyncTable, current: VectorIndexPlan | None, wanted: VectorIndexPlan | None
) -> None:
    """Build, replace or drop the vector index so the table matches ``wanted``."""
    present = VECTOR_INDEX in await _index_names(table)
    if wanted is None:
        if present:
            await table.drop_index(VECTOR_INDEX)
        return
    if wanted is current and present:
        return
    config: IvfFlat | IvfSq
    if wanted.kind == "exact":
        config = IvfFlat(distance_type="cosine", num_partitions=wanted.partitions)
    else:
        config = IvfSq(distance_type="cosine", num_partitions=wanted.partitions)
    # IvfSq is missing from AsyncTable.create_index's annotation, not its implementation.
    await table.create_index("vector", config=cast(Any, config), replace=True, name=VECTOR_INDEX)


class LanceStore(ClosesOnExit):
    """The :class:`~ragline.store.base.Store` on an embedded LanceDB folder.

    ``dimension`` is the vector size for a new index; an existing index keeps
    its own (see :attr:`dimension`) until :meth:`rebuild` changes it.
    ``doc_id`` identifies a document across tenants (the sync layer derives it
    from tenant + path). Thread-safe; several processes may read while one writes.
    """

    def __init__(
        self,
        path: Path,
        *,
        dimension: int,
        ann_min_rows: int = 50_000,
        ann_ef: int = 100,
        ann_nprobes: int = 20,
        ann_refine_factor: int = 2,
        memory_index: bool = True,
        memory_rows: int = 200_000,
        int8_rows: int = 0,
        int8_rerank: float = 1.5,
        int8_threads: int = 1,
        int8_dims: int = 256,
        int8_dims_rerank: int = 20,
        bm25_prune_rows: int = PRUNE_MIN_ROWS,
        parallel_rows: int = PARALLEL_MIN_ROWS,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if ann_min_rows < 0 or ann_ef < 1 or ann_nprobes < 1 or ann_refine_factor < 1:
            raise ValueError(
                "ann_min_rows must be ≥ 0 and ann_ef, ann_nprobes, ann_refine_factor ≥ 1"
            )
        self.path = Path(path)
        self._meta_file = self.path / META_FILE  # joined once: each search stats it
        self.ann_min_rows = ann_min_rows
        self.ann_ef = ann_ef  # only used by HNSW indexes; kept for indexes built elsewhere
        self.ann_nprobes = ann_nprobes
        self.ann_refine_factor = ann_refine_factor
        #: The mirror's BM25 skips postings (MaxScore) from this many rows on.
        self.bm25_prune_rows = bm25_prune_rows
        #: The mirror's hybrid search runs its two stages concurrently from this many rows on.
        self.parallel_rows = parallel_rows
        self._lock = threading.RLock()
        self._closed = False
        self._meta = _Meta()
        self._meta_stamp: tuple[int, int, int] | None = None
        self._chunks: AsyncTable | None = None
        self._chunks_name = ""
        self._versions: tuple[str, Path] = ("", self.path)  # see _versions_dir
        self._dimension = dimension
        #: In-process indexes mirroring the table (lance_memory); None: LanceDB's own.
        self._mirror = (
            LanceMirror(
                dimension,
                _run,
                self._open_at,
                memory_rows,
                int8_rows,
                int8_rerank,
                int8_threads,
                int8_dims,
                int8_dims_rerank,
            )
            if memory_index
            else None
        )
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._db: AsyncConnection = _run(
                lancedb.connect_async(self.path, read_consistency_interval=timedelta(0))
            )
            for attempt in range(_OPEN_ATTEMPTS):
                try:
                    self._open_tables(dimension)
                    break
                except StoreError as exc:
                    # Two processes creating one fresh index (a server and an ingest
                    # started together) race on its first commits; LanceDB calls the
                    # loser's commit retryable, or lists the winner's table before its
                    # first version is written (opening it says "not found"); the retry
                    # finds the winner's tables.
                    if not _racing_creation(exc) or attempt == _OPEN_ATTEMPTS - 1:
                        raise
                    time.sleep(0.05 * 2**attempt)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"{self.path}: cannot open the index: {exc}") from exc
        self.abilities = StoreAbilities(warm_up=self.warm_up, describe=self.index_info)

    def _open_tables(self, dimension: int) -> None:
        """Open the tables, creating them (and their indexes) in a fresh index."""
        with self._lock:
            if not self._meta_path().is_file():
                table = _run(_open_or_create(self._db, CHUNKS_TABLE, chunk_schema(dimension)))
                _run(_ensure_indexes(table))
                _write_atomic(self._meta_path(), _Meta().to_json())
            self._docs: AsyncTable = _run(
                _open_or_create(self._db, DOCUMENTS_TABLE, DOCUMENT_SCHEMA)
            )
            self._refresh()

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> LanceStore:
        """Open an existing index with the dimension it was built with."""
        meta_path = Path(path) / META_FILE
        if not meta_path.is_file():
            raise StoreError(f"{path}: no ragline index here (missing {META_FILE})")
        meta = _Meta.from_file(meta_path)

        async def dimension() -> int:
            db = await lancedb.connect_async(Path(path))
            return await _table_dimension(await db.open_table(meta.chunks_table))

        try:
            dim = _run(dimension())
        except Exception as exc:
            raise StoreError(f"{path}: cannot open table {meta.chunks_table!r}: {exc}") from exc
        return cls(path, dimension=dim, **kwargs)

    # ------------------------------------------------------------------ handles

    @property
    def dimension(self) -> int:
        """Vector size of the live chunks table."""
        self._table()
        return self._dimension

    def _meta_path(self) -> Path:
        return self._meta_file

    def _refresh(self) -> None:
        """Follow meta.json (fingerprint, rebuild swaps) when another writer changed it:
        one ``stat`` per call, a re-read only when the file was replaced."""
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")
        try:
            st = os.stat(self._meta_path())
        except FileNotFoundError as exc:
            raise StoreError(f"{self.path}: index metadata {META_FILE} is missing") from exc
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._meta_stamp and self._chunks is not None:
            return
        meta = _Meta.from_file(self._meta_path())
        if self._chunks is None or meta.chunks_table != self._chunks_name:
            try:
                table = _run(self._db.open_table(meta.chunks_table))
                dimension = _run(_table_dimension(table))
            except Exception as exc:
                raise StoreError(
                    f"{self.path}: cannot open chunks table {meta.chunks_table!r}: {exc}"
                ) from exc
            self._chunks, self._chunks_name, self._dimension = table, meta.chunks_table, dimension
        self._meta = meta
        self._meta_stamp = stamp

    def _table(self) -> AsyncTable:
        with self._lock:
            self._refresh()
            assert self._chunks is not None
            return self._chunks

    def _write_meta(self, meta: _Meta) -> None:
        _write_atomic(self._meta_path(), meta.to_json())
        self._meta_stamp = None  # re-read (and re-open the table if it moved)
        self._refresh()

    # -------------------------------------------------------------- fingerprint

    def fingerprint(self, new: ModelFingerprint | None = None) -> ModelFingerprint | None:
        return record_or_read(new, self._record_fingerprint, self._stored_fingerprint)

    def _stored_fingerprint(self) -> ModelFingerprint | None:
        with self._lock:
            self._refresh()
            return self._meta.fingerprint

    def _record_fingerprint(self, fingerprint: ModelFingerprint) -> None:
        """Record the model; an empty index simply takes the model's dimension."""
        with self._lock:
            table = self._table()
            if takes_new_dimension(
                fingerprint, self._dimension, lambda: int(_run(table.count_rows()))
            ):
                self.rebuild(fingerprint, [])
                return
            self._write_meta(replace(self._meta, fingerprint=fingerprint))

    # ------------------------------------------------------------------- writes

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        """One commit for the whole batch's chunks, then one for the records.

        The chunk commit is a ``merge_insert`` that upserts every new chunk by id
        and deletes the batch documents' other chunks, or a plain append when
        none of the documents has chunks yet (at 100k rows, 1,000 chunks: ~200 ms
        for the merge with its join against the whole table, ~25 ms appended)."""
        if not items:
            return
        dimension = self.dimension
        checked = check_writes(items, dimension)
        data = pa.concat_tables(
            [
                chunks_to_arrow(item.chunks, vecs, dimension)
                for item, vecs in zip(items, checked, strict=True)
            ]
        )
        records = pa.Table.from_pylist(
            [_document_to_row(item.record) for item in items], schema=DOCUMENT_SCHEMA
        )
        gone = sql_in_list("doc_id", sorted({item.record.doc_id for item in items}))

        async def write(table: AsyncTable) -> None:
            if await table.count_rows(gone) == 0:
                # New documents only (a first ingest): a plain append is also one
                # commit, without the merge's join against the whole table.
                if data.num_rows:
                    await table.add(data)
            else:
                await (
                    table.merge_insert("id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .when_not_matched_by_source_delete(gone)
                    .execute(data)
                )
            await (
                self._docs.merge_insert("doc_id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(records)
            )

        with self._lock:
            table = self._table()
            if self._dimension != dimension:  # a rebuild elsewhere changed it meanwhile
                raise StoreError(f"{self.path}: the index was rebuilt during the write; retry")
            try:
                _run(write(table))
            except Exception as exc:
                first = items[0].record.source
                raise StoreError(
                    f"{self.path}: writing {len(items)} document(s) ({first}, …) failed: {exc}"
                ) from exc

    def delete_document(self, doc_id: str) -> None:
        pred = f"doc_id = {sql_literal(doc_id)}"

        async def delete(table: AsyncTable) -> None:
            await table.delete(pred)  # chunks first: a crash leaves the record → redo
            await self._docs.delete(pred)

        with self._lock:
            table = self._table()
            try:
                _run(delete(table))
            except Exception as exc:
                raise StoreError(f"document {doc_id!r}: delete failed: {exc}") from exc

    # ------------------------------------------------------------------ reads

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        self._table()  # closed / missing-index checks
        query = self._docs.query().select(list(DOCUMENT_COLUMNS))
        if tenant is not None:
            query = query.where(to_sql_predicate({"tenant": tenant}, DOCUMENT_FILTER_FIELDS))
        records = _rows_to_documents(_run(query.to_arrow()))
        records.sort(key=lambda r: (r.tenant, r.source, r.doc_id))
        return records

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        wanted = positions(indices)
        if wanted == []:
            return []
        table = self._table()
        pred = f"doc_id = {sql_literal(doc_id)}"
        if wanted is not None:
            pred = and_predicates(pred, sql_in_list("chunk_index", wanted))
        rows = _run(table.query().where(pred).select(list(CHUNK_COLUMNS)).to_arrow())
        return sorted(arrow_to_chunks(rows), key=lambda c: c.chunk_index)

    def info(self, filters: Filters | None = None) -> StoreInfo:
        return StoreInfo(self._count(filters), self.dimension)

    def _count(self, filters: Filters | None = None) -> int:
        pred = chunk_predicate(filters, "datafusion")
        return int(_run(self._table().count_rows(pred or None)))

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        """Streams Arrow batches of the table version current at the first call."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        table = self._table()
        dimension = self._dimension
        query = table.query().select([*CHUNK_COLUMNS, "vector"])
        reader = _run(query.to_batches(max_batch_length=batch_size))
        while True:
            try:
                batch = _run(reader.__anext__())
            except StopAsyncIteration:
                return
            if batch.num_rows:
                yield arrow_to_chunks(batch), arrow_vectors(batch, dimension)

    # ----------------------------------------------------------------- search

    def candidates(self, query: CandidateQuery) -> Candidates:
        """Both sides on one snapshot of the mirror (weighted: fused there by row
        position), or LanceDB's two queries concurrently; one side alone as asked."""
        q = query
        if q.vector is not None and q.text is not None:
            if q.weights is not None:
                fused, ms = self._weighted(
                    q.vector, q.text, q.k, q.filters, q.boosts, q.weights, q.limit
                )
                return Candidates([], [], ms, fused)
            vector, keyword, ms = self._hybrid(q.vector, q.text, q.k, q.filters, q.boosts)
            return Candidates(vector, keyword, ms)
        return candidates_in_turn(self._cosine_top, self._bm25_top, q)

    def _cosine_top(
        self, query: Vectors, k: int, filters: Filters | None = None
    ) -> list[tuple[str, float]]:
        """Top-k (chunk id, cosine): exact, from the in-process mirror when it is on."""
        q = self._check_query_vector(query)
        pred = chunk_predicate(filters, "datafusion")
        mirrored = self._mirrored() if k > 0 else None
        if mirrored is None:
            return _cosine_pairs(_rows(self._vector_query(q, k, pred, ["id", "_distance"])))
        return self._mirror_vector(mirrored, q, k, pred)

    def _bm25_top(
        self,
        query: str,
        k: int,
        filters: Filters | None = None,
        boosts: FieldBoosts | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (chunk id, BM25 score), from the in-process mirror when it is on."""
        pred = chunk_predicate(filters, "datafusion")
        mirrored = self._mirrored() if k > 0 else None
        if mirrored is None:
            search = self._keyword_query(query, k, pred, boosts, ["id", "_score"])
            return _score_pairs(_rows(search))
        return self._mirror_keyword(mirrored, query, k, pred, boosts)

    def _hybrid(
        self,
        query_vector: Vectors,
        query: str,
        k: int,
        filters: Filters | None,
        boosts: FieldBoosts | None,
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]], dict[str, float]]:
        """:meth:`_cosine_top` and :meth:`_bm25_top` in one call, with each
        one's milliseconds (``vector``, ``keyword``). On the mirror they run one after
        the other (in-process, no I/O); on LanceDB's own queries concurrently on its
        loop in one hop, so their times overlap."""
        q = self._check_query_vector(query_vector)
        pred = chunk_predicate(filters, "datafusion")
        t0 = time.perf_counter()  # a refresh of the mirror counts as vector time
        mirrored = self._mirrored() if k > 0 else None
        if mirrored is not None:
            vpairs = self._mirror_vector(mirrored, q, k, pred)
            t1 = time.perf_counter()
            kpairs = self._mirror_keyword(mirrored, query, k, pred, boosts)
            t2 = time.perf_counter()
            return vpairs, kpairs, {"vector": (t1 - t0) * 1e3, "keyword": (t2 - t1) * 1e3}
        vector = self._vector_query(q, k, pred, ["id", "_distance"])
        keyword = self._keyword_query(query, k, pred, boosts, ["id", "_score"])

        async def timed(search: Any) -> tuple[pa.Table | None, float]:
            if search is None:
                return None, 0.0
            t0 = time.perf_counter()
            rows = await search.to_arrow()
            return rows, (time.perf_counter() - t0) * 1000.0

        async def both() -> list[tuple[pa.Table | None, float]]:
            return list(await asyncio.gather(timed(vector), timed(keyword)))

        (vrows, vms), (krows, kms) = _run(both())
        return _cosine_pairs(vrows), _score_pairs(krows), {"vector": vms, "keyword": kms}

    def _weighted(
        self,
        query_vector: Vectors,
        query: str,
        k: int,
        filters: Filters | None,
        boosts: FieldBoosts | None,
        weights: tuple[float, float],
        limit: int | None,
    ) -> tuple[list[Fused], dict[str, float]]:
        """On the mirror: both searches on one snapshot, fused on row positions in
        numpy (:func:`weighted_positions`; ids only for the head); else :meth:`_hybrid`
        fused by id.
        On a table of ``parallel_rows`` rows or more, the vector scan runs on a worker
        thread while this one runs BM25, unless another search is in flight
        (:mod:`ragline.store.stages`); each stage then reports its own time."""
        q = self._check_query_vector(query_vector)
        pred = chunk_predicate(filters, "datafusion")
        t0 = time.perf_counter()  # a refresh of the mirror and the mask count as vector time
        snap = self._mirrored() if k > 0 else None
        if snap is None:
            vpairs, kpairs, ms = self._hybrid(q, query, k, filters, boosts)
            t1 = time.perf_counter()
            fused = weighted_pairs(vpairs, kpairs, *weights, limit=limit)
            return fused, {**ms, "fusion": (time.perf_counter() - t1) * 1e3}
        assert self._mirror is not None
        allowed = self._mirror.mask(snap, pred)  # once, before the stages split
        t1 = time.perf_counter()
        vector, keyword, vms, kms, _ = STAGES.run(
            lambda: snap.vectors.search(q, k, allowed),
            lambda: self._keyword_top(snap, query, k, allowed, boosts),
            snap.rows,
            self.parallel_rows,
        )
        t2 = time.perf_counter()
        fused = weighted_positions(vector, keyword, snap.ids, *weights, limit=limit)
        ms = {"vector": (t1 - t0) * 1e3 + vms, "keyword": kms}
        return fused, {**ms, "fusion": (time.perf_counter() - t2) * 1e3}

    # -- in-process mirror

    async def _open_at(self, name: str, version: int) -> AsyncTable:
        """A handle on table ``name`` that stays at ``version`` (the mirror's reads)."""
        table = await self._db.open_table(name)
        await table.checkout(version)
        return table

    def warm_up(self) -> None:
        """Build the in-process search indexes now (they are otherwise built by the
        first search, in the background on a big table): servers and benchmarks."""
        self._mirrored(wait=True)

    def _mirrored(self, *, wait: bool = False) -> Snapshot | None:
        """The mirror's snapshot of the table's latest version; None when the mirror
        is off or still being built (LanceDB's own queries answer meanwhile)."""
        if self._mirror is None:
            return None
        table = self._table()
        try:
            versions = self._versions_dir()
            return self._mirror.snapshot(
                table, self._chunks_name, self._dimension, versions, wait=wait
            )
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"{self.path}: cannot load the search indexes: {exc}") from exc

    def _versions_dir(self) -> Path:
        """The chunks table's ``_versions`` folder (joined once per table name)."""
        name, path = self._versions
        if name != self._chunks_name:
            name = self._chunks_name
            path = self.path / f"{name}.lance" / "_versions"
            self._versions = (name, path)
        return path

    def _mirror_vector(
        self, snap: Snapshot, q: Vectors, k: int, pred: str
    ) -> list[tuple[str, float]]:
        assert self._mirror is not None
        allowed = self._mirror.mask(snap, pred)
        rows, sims = snap.vectors.search(q, k, allowed)
        return list(zip(snap.ids[rows].tolist(), sims.tolist(), strict=True))

    def _mirror_keyword(
        self,
        snap: Snapshot,
        query: str,
        k: int,
        pred: str,
        boosts: FieldBoosts | None,
    ) -> list[tuple[str, float]]:
        rows, scores = self._mirror_keyword_rows(snap, query, k, pred, boosts)
        return list(zip(snap.ids[rows].tolist(), scores.tolist(), strict=True))

    def _mirror_keyword_rows(
        self,
        snap: Snapshot,
        query: str,
        k: int,
        pred: str,
        boosts: FieldBoosts | None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.floating]]:
        """The BM25 top-k as (row positions, scores), best first."""
        assert self._mirror is not None
        return self._keyword_top(snap, query, k, self._mirror.mask(snap, pred), boosts)

    def _keyword_top(
        self,
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
        counts = query_counts(query[:_MAX_QUERY_CHARS])
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # the exhaustive scorer's top-k (filters applied before it), with most postings
        # of a big index skipped (MaxScore, store/keyword_index.py)
        rows, scores = snap.keywords.top(
            counts, (b.title, b.headings, b.text), k, allowed, self.bm25_prune_rows
        )
        return rows, scores

    # -- LanceDB's own queries

    def _check_query_vector(self, query: Vectors) -> Vectors:
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self._dimension:
            raise StoreError(
                f"query vector has dimension {q.shape[0]} but the index stores {self._dimension}"
            )
        if not np.isfinite(q).all():
            raise StoreError("query vector contains NaN or infinite values")
        return q

    def _vector_query(self, q: Vectors, k: int, pred: str, columns: list[str]) -> Any:
        """The LanceDB vector query (not run), or None when nothing can match."""
        if k <= 0:
            return None
        table = self._table()
        search = (
            table.query()
            .nearest_to(q)
            .column("vector")
            .distance_type("cosine")
            .select(columns)
            .limit(k)
        )
        plan = self._meta.vector_index  # what the last optimize() built (meta is fresh)
        if plan is not None and plan.kind == "exact":
            search = search.nprobes(max(plan.partitions, self.ann_nprobes))  # all of them
        elif plan is not None:
            search = (
                search.nprobes(self.ann_nprobes)
                .refine_factor(self.ann_refine_factor)
                .ef(self.ann_ef)
            )
        if pred:
            search = search.where(pred)  # a pre-filter unless .postfilter() is asked for
        return search

    def _keyword_query(
        self,
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
            (f, w)
            for f, w in zip(KEYWORD_FIELDS, (b.title, b.headings, b.text), strict=True)
            if w > 0
        ]
        if not weighted:
            return None
        fts = MultiMatchQuery(
            text,
            [f for f, _ in weighted],
            boosts=[float(w) for _, w in weighted],
            operator=FullTextOperator.OR,
        )
        search = self._table().query().nearest_to_text(fts).select(columns).limit(k)
        if pred:
            search = search.where(pred)
        return search

    # -- rows of the final hits

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        """Stored chunks with each chunk's stored vector, in the same read: on the
        mirror (:meth:`LanceMirror.chunk_rows`), else by LanceDB's ``id IN (…)`` scan."""
        snap = self._mirrored() if ids else None
        if snap is not None:
            assert self._mirror is not None
            at = self._positions(snap, ids)
            chunks, _, vecs = self._mirror.chunk_rows(snap, at, vectors=True)
            assert vecs is not None
            return {c.id: (c, v) for c, v in zip(chunks, vecs, strict=True)}
        if not ids:
            return {}
        unique = list(dict.fromkeys(ids))
        query = self._table().query().where(sql_in_list("id", unique))
        rows = _run(query.select([*CHUNK_COLUMNS, "vector"]).to_arrow())
        vecs = arrow_vectors(rows, self._dimension)
        return {c.id: (c, v) for c, v in zip(arrow_to_chunks(rows), vecs, strict=True)}

    def _snapshot_chunks(self, snap: Snapshot, ids: Sequence[str]) -> dict[str, Chunk]:
        assert self._mirror is not None
        chunks, _, _ = self._mirror.chunk_rows(snap, self._positions(snap, ids))
        return {c.id: c for c in chunks}

    @staticmethod
    def _positions(snap: Snapshot, ids: Sequence[str]) -> IntArray:
        """Positions in ``snap`` of the distinct ``ids`` it has, in first-seen order."""
        where = snap.position
        return np.asarray([where[i] for i in dict.fromkeys(ids) if i in where], np.int64)

    # ------------------------------------------------------------ maintenance

    def optimize(self) -> None:
        """Compact, drop versions older than a minute, fold new rows into every
        index, and build, retrain or drop the vector index as the table's size
        asks (see :func:`plan_vector_index`)."""

        async def run(table: AsyncTable) -> VectorIndexPlan | None:
            await _ensure_indexes(table)
            await table.optimize(cleanup_older_than=_CLEANUP_AFTER)
            await self._docs.optimize(cleanup_older_than=_CLEANUP_AFTER)
            # Trust meta.json only if the index it describes is there (a crash may
            # have come between building one and recording it).
            stats = await table.index_stats(VECTOR_INDEX)
            current = self._meta.vector_index if stats is not None else None
            segments = stats.num_indices if stats is not None and stats.num_indices else 1
            rows = await table.count_rows()
            wanted = plan_vector_index(rows, current, self.ann_min_rows, segments)
            await _apply_vector_index(table, current, wanted)
            return wanted

        with self._lock:
            table = self._table()
            try:
                wanted = _run(run(table))
            except Exception as exc:
                raise StoreError(f"{self.path}: optimize failed: {exc}") from exc
            if wanted != self._meta.vector_index:
                self._write_meta(replace(self._meta, vector_index=wanted))

    def rebuild(
        self,
        fingerprint: ModelFingerprint,
        batches: Iterable[tuple[list[Chunk], Vectors]],
    ) -> int:
        with self._lock:
            self._refresh()
            old = self._meta
            generation = old.generation + 1
            name = f"{CHUNKS_TABLE}_{generation}"
            dimension = fingerprint.dimension
            try:
                # A crashed rebuild may have left tables behind; the live one stays.
                for stale in _run(_table_names(self._db)):
                    if stale.startswith(CHUNKS_TABLE) and stale != old.chunks_table:
                        _run(self._db.drop_table(stale))
                table = _run(self._db.create_table(name, schema=chunk_schema(dimension)))
            except Exception as exc:
                raise StoreError(f"{self.path}: rebuild could not start: {exc}") from exc
            count = 0
            try:
                for chunks, vectors in batches:
                    if chunks:
                        _run(table.add(chunks_to_arrow(chunks, vectors, dimension)))
                        count += len(chunks)
                vector_index = _run(self._finish_rebuilt_table(table, count))
            except BaseException:
                # Anything that stops the rebuild (a bad batch, the caller's embedder
                # failing, Ctrl-C) drops the new table and propagates unchanged; the
                # old table never stopped serving.
                with contextlib.suppress(Exception):
                    _run(self._db.drop_table(name))
                raise
            self._write_meta(
                _Meta(
                    chunks_table=name,
                    generation=generation,
                    fingerprint=fingerprint,
                    vector_index=vector_index,
                )
            )
            # A reader of another process still on the old table fails one read at
            # worst: its next call sees the new meta.json and re-opens.
            with contextlib.suppress(Exception):
                _run(self._db.drop_table(old.chunks_table))
            return count

    async def _finish_rebuilt_table(self, table: AsyncTable, count: int) -> VectorIndexPlan | None:
        """Compact the freshly written table and build its indexes before it goes live."""
        await table.optimize(cleanup_older_than=_CLEANUP_AFTER)
        await _ensure_indexes(table)
        wanted = plan_vector_index(count, None, self.ann_min_rows)
        await _apply_vector_index(table, None, wanted)
        return wanted

    def index_info(self) -> dict[str, Any]:
        """What ``ragline status`` shows: live table, rows, dimension, and each
        index with the rows it does not cover yet (searched exhaustively until
        the next :meth:`optimize`)."""
        table = self._table()

        async def info() -> tuple[int, list[Any]]:
            return await table.count_rows(), list(await table.list_indices())

        rows, indexes = _run(info())
        vector = next((ix.index_type for ix in indexes if ix.name == VECTOR_INDEX), None)
        plan = self._meta.vector_index
        return {
            "path": str(self.path),
            "table": self._chunks_name,
            "rows": rows,
            "dimension": self._dimension,
            "vector_index": vector,
            "vector_search": "approximate" if plan and plan.kind == "ann" else "exact",
            "indexes": {
                ix.name: {"type": ix.index_type, "unindexed_rows": ix.num_unindexed_rows}
                for ix in indexes
            },
        }

    def close(self) -> None:
        """Forget the table handles; later calls raise StoreError."""
        with self._lock:
            self._closed = True
            self._chunks = None
