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

The work is split by job: :mod:`ragline.store.lance_tables` (schemas, Arrow rows,
meta.json, LanceDB's loop, a rebuild's new table), :mod:`ragline.store.lance_indexes`
(the LanceDB indexes) and :mod:`ragline.store.lance_search` (the searches, on the
mirror or LanceDB's own).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store import lance_search as search
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
    check_writes,
    listing_order,
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
from ragline.store.lance_cache import cache_path, drop_stale, write_rows
from ragline.store.lance_indexes import (
    describe_indexes,
    ensure_indexes,
    optimize_table,
    table_indexes,
)
from ragline.store.lance_memory import BACKGROUND_ROWS, MEMORY_COLUMNS, LanceMirror, Snapshot
from ragline.store.lance_tables import (
    CHUNKS_TABLE,
    DOCUMENT_SCHEMA,
    DOCUMENTS_TABLE,
    META_FILE,
    OPEN_ATTEMPTS,
    Meta,
    build_generation,
    chunk_schema,
    chunks_to_arrow,
    document_to_row,
    open_or_create,
    racing_creation,
    rows_to_documents,
    stored_dimension,
    table_dimension,
    write_atomic,
)
from ragline.store.lance_tables import run as _run
from ragline.store.stages import PARALLEL_MIN_ROWS
from ragline.types import Chunk, DocumentRecord, Filters

if TYPE_CHECKING:  # imported on first use: a cached search never needs it (lance_cache)
    from lancedb.db import AsyncConnection
    from lancedb.table import AsyncTable

log = logging.getLogger(__name__)


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
        self._meta = Meta()
        self._meta_stamp: tuple[int, int, int] | None = None
        self._chunks: AsyncTable | None = None
        self._db: AsyncConnection | None = None  # see _connect
        self._docs_table: AsyncTable | None = None
        self._chunks_name = ""
        self._versions: tuple[str, Path] = ("", self.path)  # see _versions_dir
        self._dimension = dimension
        #: In-process indexes mirroring the table (lance_memory); None: LanceDB's own.
        self._mirror = (
            LanceMirror(
                dimension,
                _run,
                self._pinned,
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
            if self._meta_file.is_file():
                self._refresh()  # an existing index: LanceDB is opened on first use
            else:
                self._connect()  # a new one: its tables now
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"{self.path}: cannot open the index: {exc}") from exc
        self.abilities = StoreAbilities(
            vectors=self.vectors_for, warm_up=self.warm_up, describe=self.index_info
        )

    def _connect(self) -> AsyncConnection:
        """LanceDB's connection, with the documents table open (and a new index's
        tables created): at construction for a new index, else on the first call
        that needs LanceDB. A search answered from the search cache never does, and
        never pays ``import lancedb`` (:mod:`ragline.store.lance_cache`)."""
        with self._lock:
            if self._db is not None:
                return self._db
            import lancedb

            try:
                self._db = _run(
                    lancedb.connect_async(self.path, read_consistency_interval=timedelta(0))
                )
                for attempt in range(OPEN_ATTEMPTS):
                    try:
                        self._open_tables(self._db, self._dimension)
                        break
                    except StoreError as exc:
                        # Two processes creating one fresh index (a server and an ingest
                        # started together) race on its first commits; LanceDB calls the
                        # loser's commit retryable, or lists the winner's table before
                        # its first version is written (opening it says "not found");
                        # the retry finds the winner's tables.
                        if not racing_creation(exc) or attempt == OPEN_ATTEMPTS - 1:
                            raise
                        time.sleep(0.05 * 2**attempt)
            except BaseException as exc:
                self._db = None
                if isinstance(exc, StoreError) or not isinstance(exc, Exception):
                    raise
                raise StoreError(f"{self.path}: cannot open the index: {exc}") from exc
            return self._db

    def _open_tables(self, db: AsyncConnection, dimension: int) -> None:
        """Open the documents table, creating the tables (and their indexes) of a
        fresh index."""
        with self._lock:
            if not self._meta_path().is_file():
                table = _run(open_or_create(db, CHUNKS_TABLE, chunk_schema(dimension)))
                _run(ensure_indexes(table))
                write_atomic(self._meta_path(), Meta().to_json())
            self._docs_table = _run(open_or_create(db, DOCUMENTS_TABLE, DOCUMENT_SCHEMA))
            self._refresh()

    @property
    def _docs(self) -> AsyncTable:
        """The documents table (open once :meth:`_table` has run)."""
        assert self._docs_table is not None, "call _table() first"
        return self._docs_table

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> LanceStore:
        """Open an existing index with the dimension it was built with."""
        return cls(path, dimension=stored_dimension(Path(path)), **kwargs)

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
        if stamp == self._meta_stamp:
            return
        meta = Meta.from_file(self._meta_path())
        if meta.chunks_table != self._chunks_name:
            # another table (a rebuild swapped it): opened by the next _table(); a
            # recorded model gives its dimension (the table was built for it)
            self._chunks, self._chunks_name = None, meta.chunks_table
            if meta.fingerprint is not None:
                self._dimension = meta.fingerprint.dimension
        self._meta = meta
        self._meta_stamp = stamp

    def _live(self) -> str:
        """The live chunks table's name (meta.json followed; LanceDB not opened)."""
        with self._lock:
            self._refresh()
            return self._chunks_name

    def _table(self) -> AsyncTable:
        """The live chunks table's handle (connecting to LanceDB on first use)."""
        with self._lock:
            self._refresh()
            db = self._connect()
            if self._chunks is None:
                name = self._chunks_name
                try:
                    table = _run(db.open_table(name))
                    dimension = _run(table_dimension(table))
                except Exception as exc:
                    raise StoreError(
                        f"{self.path}: cannot open chunks table {name!r}: {exc}"
                    ) from exc
                self._chunks, self._dimension = table, dimension
            return self._chunks

    def _write_meta(self, meta: Meta) -> None:
        write_atomic(self._meta_path(), meta.to_json())
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
            [document_to_row(item.record) for item in items], schema=DOCUMENT_SCHEMA
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
        records = rows_to_documents(_run(query.to_arrow()))
        return listing_order(records)

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        wanted = positions(indices)
        if wanted == []:
            return []
        held = search.chunks_by_index(self, doc_id, wanted)
        if held is not None:
            return held
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
        position), or LanceDB's two queries concurrently; one side alone as asked
        (:func:`ragline.store.lance_search.candidates`)."""
        return search.candidates(self, query)

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        """Stored chunks with each chunk's stored vector, in the same read: on the
        mirror, else by LanceDB's ``id IN (…)`` scan."""
        return search.chunks_with_vectors(self, ids)

    def vectors_for(self, ids: Sequence[str]) -> dict[str, Vectors]:
        """Stored vectors by id without their chunks (``abilities.vectors``)."""
        return search.vectors_for(self, ids)

    # -- in-process mirror

    async def _open_at(self, name: str, version: int) -> AsyncTable:
        """A handle on table ``name`` that stays at ``version`` (the mirror's reads)."""
        assert self._db is not None, "a pinned handle opens after _connect()"
        table = await self._db.open_table(name)
        await table.checkout(version)
        return table

    def _pinned(self, name: str, version: int) -> AsyncTable:
        """:meth:`_open_at` from a caller's thread, connecting first (the mirror's
        refreshes, and a cached snapshot's first filter LanceDB must evaluate)."""
        self._connect()
        return _run(self._open_at(name, version))

    def warm_up(self) -> None:
        """Build the in-process search indexes now (they are otherwise built by the
        first search, in the background on a big table): servers and benchmarks."""
        self._mirrored(wait=True)

    def _mirrored(self, *, wait: bool = False) -> Snapshot | None:
        """The mirror's snapshot of the latest table version, or None
        (:func:`ragline.store.lance_search.mirror_snapshot`)."""
        return search.mirror_snapshot(self, wait=wait)

    # ------------------------------------------------------------ maintenance

    def optimize(self) -> None:
        """Compact, drop versions older than a minute, fold new rows into every
        index, and build, retrain or drop the vector index as the table's size
        asks (see :func:`plan_vector_index`)."""
        with self._lock:
            table = self._table()
            try:
                run = optimize_table(table, self._docs, self._meta.vector_index, self.ann_min_rows)
                wanted = _run(run)
            except Exception as exc:
                raise StoreError(f"{self.path}: optimize failed: {exc}") from exc
            if wanted != self._meta.vector_index:
                self._write_meta(replace(self._meta, vector_index=wanted))
            self._write_search_cache()

    def _write_search_cache(self) -> None:
        """Write the live version's rows as the search cache (:mod:`ragline.store.
        lance_cache`), so the next process's first search skips ``import lancedb``;
        only for a table its mirror would build in the foreground (at most
        ``BACKGROUND_ROWS`` rows: a larger one is first searched through LanceDB
        anyway). Best effort: without it a reader asks LanceDB, as before."""
        if self._mirror is None:
            return
        with self._lock:
            name = self._chunks_name
            try:
                table = self._table()
                version = int(_run(table.version()))
                if int(_run(table.count_rows())) > BACKGROUND_ROWS:
                    cache_path(self.path, name).unlink(missing_ok=True)
                    return
                pinned = _run(self._open_at(name, version))
                query = pinned.query().select([*CHUNK_COLUMNS, "vector"]).with_row_id()
                write_rows(self.path, name, version, _run(query.to_arrow()), MEMORY_COLUMNS)
                drop_stale(self.path, name)
            except (StoreError, OSError) as exc:
                log.warning("%s: the search cache was not written: %s", self.path, exc)

    def rebuild(
        self,
        fingerprint: ModelFingerprint,
        batches: Iterable[tuple[list[Chunk], Vectors]],
    ) -> int:
        """Fill a new table (:func:`build_generation`), then point meta.json at it."""
        with self._lock:
            self._refresh()
            db = self._connect()
            old = self._meta
            meta, count = build_generation(
                db, self.path, old, fingerprint, batches, self.ann_min_rows
            )
            self._write_meta(meta)
            # A reader of another process still on the old table fails one read at
            # worst: its next call sees the new meta.json and re-opens.
            with contextlib.suppress(Exception):
                _run(db.drop_table(old.chunks_table))
            self._write_search_cache()
            return count

    def index_info(self) -> dict[str, Any]:
        """What ``ragline status`` shows: live table, rows, dimension, and each
        index with the rows it does not cover yet (searched exhaustively until
        the next :meth:`optimize`)."""
        table = self._table()
        rows, indexes = _run(table_indexes(table))
        return {
            "path": str(self.path),
            "table": self._chunks_name,
            "rows": rows,
            "dimension": self._dimension,
            **describe_indexes(indexes, self._meta.vector_index),
        }

    def close(self) -> None:
        """Forget the table handles; later calls raise StoreError."""
        with self._lock:
            self._closed = True
            self._chunks = None
