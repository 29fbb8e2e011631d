"""In-process search indexes mirroring a LanceDB chunks table, refreshed by version.

LanceDB stays the source of truth (crash safety, atomic swaps, other processes'
writes); this module keeps what a search needs in memory, built from the table's
rows: the vectors (:mod:`ragline.store.vector_index`: int8 codes scanned first and
the best candidates re-scored from float32 rows, or float16 unit rows above
``keep_rows``) and BM25 postings from ragline's own analyser
(:mod:`ragline.store.keyword_index`).

Freshness: every search first asks the table for its version (≈ 0.1 ms; the
connection checks the latest manifest on each read). When it moved, the mirror
is brought up to date before the search runs, from a handle pinned to that
version (``checkout``): the ``_rowid`` column is read, rows whose row id vanished
are dropped and rows with a new row id are read and analysed. A LanceDB row id
names one immutable row version (an update or a compaction writes the row again
under a new id), so this diff is exact: a writer in another process is visible to
the next search, deleted rows vanish at once.

Everything a search reads goes through the snapshot's pinned handle, so one
search sees one version, as a LanceDB query would: filters are LanceDB ``where``
predicates evaluated on it (only row ids come back), applied as a mask before
the top-k and cached per version and predicate; the final hits' rows are taken
from it by row id.

Rows of the final hits: every snapshot keeps the chunk columns but
:data:`DISK_COLUMNS` as :mod:`ragline.store.held_columns` (numbers, and codes into
the distinct strings, which mostly repeat per document or section); a small one
keeps :data:`DISK_COLUMNS` as an Arrow table too, a large one reads only those from
LanceDB. LanceDB's take costs ≈ 0.55 ms per column for 10 rows scattered over 1M
rows (all 22 chunk columns: 13 ms; benchmarks/results/search_core.md, section 8), so
the columns it reads, not the rows, set the price. The held columns turn into a
hit's Python values with a numpy gather per column, ≈ 5× cheaper than an Arrow
take and ``to_pylist`` per column (benchmarks/results/search_hits.md).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ragline.store.arrow import arrow_to_chunks, arrow_vectors
from ragline.store.base import CHUNK_COLUMNS, chunk_from_row
from ragline.store.held_columns import HeldColumns, HeldColumnsBuilder, StringsAt, plain
from ragline.store.keyword_index import KeywordIndex
from ragline.store.lance_cache import latest_version
from ragline.store.vector_index import (
    BoolArray,
    F32Array,
    IntArray,
    VectorIndex,
    VectorIndexBuilder,
    VectorLayout,
    layout_for,
)
from ragline.text.bm25 import FieldTerms, chunk_terms
from ragline.types import Chunk

if TYPE_CHECKING:
    from lancedb.table import AsyncTable

    from ragline.store.lance_cache import CachedRows

log = logging.getLogger(__name__)

#: A versions folder whose mtime is at least this old is trusted to show every
#: commit (a coarse-mtime file system cannot hide a later one in the same tick).
SETTLED_NS = 2_000_000_000
#: A refresh reading more rows than this runs in a background thread (the analyser
#: takes ≈ 15 s per 10k chunks on 2 busy cores; SciFact's 9,133 stay synchronous).
BACKGROUND_ROWS = 20_000
#: Rows read and analysed per step of a refresh (memory holds one step's Python
#: objects; 100k rows took 1.7 GiB peak when read in one piece).
REFRESH_BATCH = 8192
#: Filter masks kept per snapshot (tenant + a few metadata filters in use).
MASK_CACHE = 64
#: Chunk columns a large snapshot leaves on disk: long and unique per chunk (the
#: text, its hash; the id is in ``Snapshot.ids``). The rest take 75 MiB at 1M
#: synthetic rows as held columns, and would cost ≈ 11 ms per search on disk.
DISK_COLUMNS = ("text", "content_hash")
#: The chunk columns every snapshot keeps as held columns.
MEMORY_COLUMNS = tuple(c for c in CHUNK_COLUMNS if c not in {"id", *DISK_COLUMNS})
_UNCACHED = object()
#: ``column = 'value'`` as :func:`ragline.store.filter_sql.chunk_predicate` writes it.
_EQUALITY = re.compile(r"^([a-z_]+) = '((?:[^']|'')*)'$")


class Pinned:
    """A handle on one table version, opened on first use: a snapshot built from the
    search cache (:mod:`ragline.store.lance_cache`) reaches LanceDB only when a filter
    or a column it does not hold asks for it."""

    __slots__ = ("_handle", "_lock", "_open")

    def __init__(
        self, handle: AsyncTable | None = None, open_it: Callable[[], AsyncTable] | None = None
    ) -> None:
        if handle is None and open_it is None:
            raise ValueError("a pinned handle needs the handle or a way to open it")
        self._handle = handle
        self._open = open_it
        self._lock = threading.Lock()

    def get(self) -> AsyncTable:
        if self._handle is None:
            with self._lock:
                if self._handle is None:
                    assert self._open is not None
                    self._handle = self._open()
        return self._handle


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The mirror of one table version: row i of every index is row ``rowids[i]``."""

    table: str
    version: int
    handle: Pinned  # pinned to ``version``
    rowids: npt.NDArray[np.uint64]
    ids: npt.NDArray[np.object_]
    vectors: VectorIndex
    keywords: KeywordIndex
    by_rowid: IntArray  # positions sorted by row id (for masks and takes)
    position: dict[str, int]  # chunk id → position
    texts: pa.Table | None  # DISK_COLUMNS, row i = position i (small tables)
    held: HeldColumns | None = None  # MEMORY_COLUMNS, row i = position i
    text_values: Mapping[str, StringsAt] = field(default_factory=dict)  # views of ``texts``
    stamp: tuple[int, int] | None = None  # the versions folder's (inode, mtime) seen before

    @property
    def rows(self) -> int:
        return int(self.rowids.shape[0])

    @property
    def holds_rows(self) -> bool:
        """Whether every chunk column and the float32 vectors are in memory."""
        return self.texts is not None and self.held is not None and self.vectors.matrix is not None

    def positions(self, rowids: npt.NDArray[np.uint64]) -> IntArray:
        """Positions of the given row ids (ids this snapshot lacks are left out)."""
        if not self.rows or not len(rowids):
            return np.zeros(0, dtype=np.int64)
        sorted_ids = self.rowids[self.by_rowid]
        at = np.searchsorted(sorted_ids, rowids)
        at = np.minimum(at, self.rows - 1)
        found = sorted_ids[at] == rowids
        out: IntArray = self.by_rowid[at[found]].astype(np.int64)
        return out


def build_snapshot(
    old: Snapshot | None,
    table: str,
    version: int,
    handle: Pinned,
    rowids: npt.NDArray[np.uint64],
    new_batches: Iterable[pa.Table],
    dimension: int,
    keep_rows: int,
    layout: VectorLayout | None = None,
) -> Snapshot:
    """``old`` minus the rows whose row id is not in ``rowids``, plus the rows of
    ``new_batches`` (chunk columns, ``vector`` and ``_rowid``), analysed one batch at
    a time. The chunk columns but :data:`DISK_COLUMNS` stay in memory as held
    columns, those too while the snapshot has at most ``keep_rows`` rows; the
    vectors are kept as ``layout`` says (``old``'s layout must be the same; default:
    float32 only)."""
    vectors = VectorIndexBuilder(len(rowids), dimension, layout or VectorLayout(True, False))
    small = len(rowids) <= keep_rows
    # the columns are kept when ``old`` kept the same ones for its rows
    keeping = old is None or (old.held is not None and (not small or old.texts is not None))
    tables: list[pa.Table] = []
    held: HeldColumnsBuilder | None = None
    if old is None:
        keywords = KeywordIndex.empty()
        kept_rowids = np.zeros(0, np.uint64)
        kept_ids = np.zeros(0, dtype=object)
    else:
        keep = np.flatnonzero(np.isin(old.rowids, rowids)).astype(np.int64)
        keywords = old.keywords.kept(keep)
        vectors.add_kept(old.vectors, keep)  # each vector written once, into its final place
        kept_rowids, kept_ids = old.rowids[keep], old.ids[keep]
        if keeping and small and old.texts is not None:
            tables.append(old.texts.take(keep))
    new_rowids: list[npt.NDArray[np.uint64]] = []
    new_ids: list[npt.NDArray[np.object_]] = []

    def start(schema: pa.Schema) -> HeldColumnsBuilder:
        """The held columns' builder, with ``old``'s kept rows in it."""
        builder = HeldColumnsBuilder(schema, len(rowids))
        if old is not None and old.held is not None:
            builder.add_kept(old.held, keep)
        return builder

    def analysed() -> Iterator[list[Mapping[str, FieldTerms]]]:
        nonlocal held
        for batch in new_batches:
            new_rowids.append(batch.column("_rowid").to_numpy().astype(np.uint64))
            ids = np.empty(batch.num_rows, dtype=object)
            ids[:] = batch.column("id").to_pylist()
            new_ids.append(ids)
            vectors.add(arrow_vectors(batch, dimension))
            if keeping and small:
                tables.append(batch.select(list(DISK_COLUMNS)))
            if keeping:
                if held is None:
                    kept = old.held if old is not None else None
                    schema = kept.schema if kept is not None else batch.schema
                    held = start(pa.schema([plain(schema.field(c)) for c in MEMORY_COLUMNS]))
                held.add(batch)
            yield [chunk_terms(c) for c in arrow_to_chunks(batch)]

    keywords = keywords.appended_batches(analysed())
    if small:  # the in-memory tier keeps its BM25 saturations precomputed too
        keywords.hold_saturations()
    if keeping and held is None and old is not None and old.held is not None:
        held = start(old.held.schema)  # no new rows, only kept ones
    all_rowids = np.concatenate([kept_rowids, *new_rowids])
    all_ids = np.concatenate([kept_ids, *new_ids])
    texts = pa.concat_tables(tables).combine_chunks() if keeping and tables else None
    views = {} if texts is None else {c: StringsAt.of(texts[c]) for c in texts.column_names}
    return Snapshot(
        table=table,
        version=version,
        handle=handle,
        rowids=all_rowids,
        ids=all_ids,
        vectors=vectors.done(),
        keywords=keywords,
        by_rowid=np.argsort(all_rowids, kind="stable").astype(np.int64),
        position={i: n for n, i in enumerate(all_ids.tolist())},
        texts=texts,
        held=None if held is None else held.done(),
        text_values=views,
    )


def settled_stamp(versions_dir: Path | None) -> tuple[int, int] | None:
    """(inode, mtime) of a settled versions folder; None when absent or just changed."""
    if versions_dir is None:
        return None
    try:
        st = os.stat(versions_dir)
    except OSError:
        return None
    if time.time_ns() - st.st_mtime_ns < SETTLED_NS:
        return None
    return st.st_ino, st.st_mtime_ns


def held_equality(snap: Snapshot, predicate: str) -> BoolArray | None:
    """The rows of ``snap`` that a lone string equality (``tenant = 'acme'``, the
    filter every search of a tenant carries) selects, from the held columns; None
    for any other predicate, which LanceDB evaluates on the pinned version."""
    found = _EQUALITY.match(predicate)
    if found is None or snap.held is None:
        return None
    return snap.held.equal_to(found.group(1), found.group(2).replace("''", "'"))


Run = Callable[[Coroutine[Any, Any, Any]], Any]
#: Opens table ``name`` checked out at ``version`` (a handle that never moves).
OpenAt = Callable[[str, int], "AsyncTable"]


class LanceMirror:
    """The current :class:`Snapshot` of one table, refreshed on use. Thread-safe.

    ``run`` executes one LanceDB coroutine to completion (the store's event-loop
    bridge); the mirror's own locking happens outside the loop, in the caller's
    thread, so a refresh never blocks the loop other queries run on."""

    def __init__(
        self,
        dimension: int,
        run: Run,
        open_at: OpenAt,
        keep_rows: int,
        int8_rows: int = 0,
        rerank: float = 1.5,
        threads: int = 1,
        dims: int = 0,
        dims_rerank: int = 20,
    ) -> None:
        self.dimension = dimension
        self.keep_rows = keep_rows
        self.int8_rows = int8_rows
        self.rerank = rerank
        self.threads = threads
        self.dims = dims
        self.dims_rerank = dims_rerank
        self._run = run
        self._open_at = open_at
        self._snapshot: Snapshot | None = None
        self._masks: OrderedDict[tuple[str, int, str], BoolArray | None] = OrderedDict()
        self._lock = threading.Lock()
        self._building: threading.Thread | None = None

    def snapshot(
        self,
        latest: Callable[[], int],
        name: str,
        dimension: int,
        versions_dir: Path | None = None,
        *,
        wait: bool = False,
    ) -> Snapshot | None:
        """The snapshot of table ``name`` at its ``latest()`` version (refreshed when it
        moved), or None while a large refresh runs in the background.

        A refresh that must read more than :data:`BACKGROUND_ROWS` rows (the first
        search on a big index, a search after a compaction) runs in a thread unless
        ``wait``; meanwhile the caller answers from LanceDB's own queries, which are
        always current, so no search waits minutes for the analyser.

        With ``versions_dir`` (the table's ``_versions`` folder, local tables), a quiet
        table costs one ``stat``: every commit adds a manifest there, so an unchanged,
        settled folder means an unchanged version; otherwise the folder's manifest names
        give the latest version (:func:`~ragline.store.lance_cache.latest_version`).
        Either way the LanceDB call (a hop to its event loop, several ms on busy cores,
        and ``import lancedb`` in a process that has not needed it yet) is skipped;
        ``latest()`` answers only for a table without a local folder."""
        stamp = settled_stamp(versions_dir)
        snap = self._snapshot
        if stamp is not None and snap is not None and snap.table == name and snap.stamp == stamp:
            return snap
        listed = latest_version(versions_dir) if versions_dir is not None else None
        version = latest() if listed is None else listed
        if snap is not None and snap.table == name and snap.version == version:
            if stamp != snap.stamp:
                snap = replace(snap, stamp=stamp)
                self._snapshot = snap
            return snap
        building = self._building
        if building is not None:
            if not wait:
                return None
            building.join()
        with self._lock:  # one refresh at a time; the others reuse its result
            snap = self._snapshot
            if snap is not None and snap.table == name and snap.version == version:
                return snap
            if dimension != self.dimension or (snap is not None and snap.table != name):
                snap, self.dimension = None, dimension
            handle, rowids, fresh, snap = self._diff(name, version, snap)
            if wait or len(fresh) <= BACKGROUND_ROWS:
                done = self._refresh(name, version, snap, handle, rowids, fresh)
                return self._install(replace(done, stamp=stamp))
            old = snap

            def build() -> None:
                try:
                    done = self._refresh(name, version, old, handle, rowids, fresh)
                    with self._lock:
                        self._install(replace(done, stamp=stamp))
                except Exception:  # the next search retries; LanceDB answers meanwhile
                    log.warning("refreshing the search indexes of %s failed", name, exc_info=True)
                finally:
                    self._building = None

            self._building = threading.Thread(target=build, name="ragline-mirror", daemon=True)
            self._building.start()
            return None

    def lacks(self, name: str) -> bool:
        """Whether no snapshot of table ``name`` is built or being built (the first
        search of a process, or the first after a rebuild swapped the table)."""
        snap = self._snapshot
        return self._building is None and (snap is None or snap.table != name)

    def adopt(self, cached: CachedRows, handle: Pinned, stamp: tuple[int, int] | None) -> Snapshot:
        """Build and install the snapshot of a cached table version (rows read from
        the search cache rather than LanceDB; the caller checked the version)."""
        rows = cached.rows
        rowids = rows.column("_rowid").to_numpy().astype(np.uint64)
        batches = (rows.slice(at, REFRESH_BATCH) for at in range(0, rows.num_rows, REFRESH_BATCH))
        with self._lock:
            self.dimension = cached.dimension
            snap = build_snapshot(
                None,
                cached.table,
                cached.version,
                handle,
                rowids,
                batches,
                self.dimension,
                self.keep_rows,
                self.layout(len(rowids)),
            )
            return self._install(replace(snap, stamp=stamp))

    def _install(self, snap: Snapshot) -> Snapshot:
        self._snapshot = snap
        self._masks.clear()
        return snap

    def layout(self, rows: int) -> VectorLayout:
        """How a snapshot of ``rows`` rows keeps its vectors (float32 while its chunk
        columns stay in memory too, int8 codes from ``int8_rows`` rows on, of ``dims``
        principal components without float32)."""
        return layout_for(
            rows,
            self.keep_rows,
            self.int8_rows,
            self.rerank,
            self.threads,
            self.dims,
            self.dims_rerank,
        )

    def _diff(
        self, name: str, version: int, old: Snapshot | None
    ) -> tuple[Pinned, npt.NDArray[np.uint64], npt.NDArray[np.uint64], Snapshot | None]:
        """(handle pinned to ``version``, its row ids, the row ids to read, the snapshot
        to build on: ``old``, or None — every row read again — when the row count moved
        it to another layout or when most rows are new (a compaction renumbers them all,
        a re-ingest may replace most): what was estimated on the old rows, the
        principal-component basis of the codes, then follows the corpus, at the cost of
        reading at most as many rows again as the refresh reads anyway)."""
        table = self._open_at(name, version)
        keys = self._run(table.query().select([]).with_row_id().to_arrow())
        rowids = keys.column("_rowid").to_numpy().astype(np.uint64)
        if old is not None and old.vectors.layout != self.layout(len(rowids)):
            old = None
        fresh = rowids if old is None else rowids[~np.isin(rowids, old.rowids)]
        if old is not None and 2 * len(fresh) > len(rowids):
            old, fresh = None, rowids
        return Pinned(table), rowids, fresh, old

    def _refresh(
        self,
        name: str,
        version: int,
        old: Snapshot | None,
        handle: Pinned,
        rowids: npt.NDArray[np.uint64],
        fresh: npt.NDArray[np.uint64],
    ) -> Snapshot:
        """The snapshot of ``version``: ``old`` plus the rows ``fresh``, minus those gone."""
        columns = [*CHUNK_COLUMNS, "vector"]

        def batches() -> Iterator[pa.Table]:
            """The new rows, read REFRESH_BATCH at a time (bounded memory at 1M rows)."""
            for start in range(0, len(fresh), REFRESH_BATCH):
                part = fresh[start : start + REFRESH_BATCH].tolist()
                take = handle.get().take_row_ids(part).select(columns).with_row_id()
                yield self._run(take.to_arrow())

        return build_snapshot(
            old,
            name,
            version,
            handle,
            rowids,
            batches(),
            self.dimension,
            self.keep_rows,
            self.layout(len(rowids)),
        )

    def mask(self, snap: Snapshot, predicate: str) -> BoolArray | None:
        """Rows of ``snap`` that satisfy the SQL ``predicate``; None when every row does
        (no predicate, or one tenant's table), which spares the top-k a gather."""
        if not predicate:
            return None
        key = (snap.table, snap.version, predicate)
        cached = self._masks.get(key, _UNCACHED)
        if cached is not _UNCACHED:
            return cached  # type: ignore[return-value]
        found = held_equality(snap, predicate)
        if found is None:
            query = snap.handle.get().query().where(predicate).select([]).with_row_id()
            rows = self._run(query.to_arrow())
            found = np.zeros(snap.rows, dtype=bool)
            found[snap.positions(rows.column("_rowid").to_numpy().astype(np.uint64))] = True
        mask = None if found.all() else found
        with self._lock:
            self._masks[key] = mask
            while len(self._masks) > MASK_CACHE:
                self._masks.popitem(last=False)
        return mask

    def chunk_rows(
        self, snap: Snapshot, positions: IntArray, *, vectors: bool = False
    ) -> tuple[list[Chunk], IntArray, F32Array | None]:
        """The chunks at ``positions`` of ``snap`` (any order), the positions they came
        from (a row gone from disk meanwhile is left out) and, with ``vectors``, their
        stored vectors (row for row). What the snapshot holds comes from memory (ids,
        held columns, :data:`DISK_COLUMNS` of a small table, float32 vectors), the rest
        from LanceDB by row id in one read; each column goes straight to Python values,
        with no Arrow array in between for the held ones."""
        if not len(positions):
            none = np.zeros((0, self.dimension), np.float32) if vectors else None
            return [], positions, none
        held = snap.held.columns if snap.held is not None else {}
        texts = snap.text_values
        from_disk = [c for c in CHUNK_COLUMNS if c not in held and c not in texts and c != "id"]
        if vectors and snap.vectors.matrix is None:
            from_disk.append("vector")
        disk: pa.Table | None = None
        if from_disk:
            positions, disk = self._take(snap, positions, from_disk)
        columns: list[list[Any]] = []
        for c in CHUNK_COLUMNS:
            if c in held:
                columns.append(held[c].values_at(positions))
            elif c == "id":
                columns.append(snap.ids[positions].tolist())
            elif c in texts:
                columns.append(texts[c].values_at(positions))
            else:
                assert disk is not None
                columns.append(disk.column(c).to_pylist())
        chunks = [chunk_from_row(row) for row in zip(*columns, strict=True)]
        if not vectors:
            return chunks, positions, None
        if disk is not None and "vector" in from_disk:
            return chunks, positions, arrow_vectors(disk, self.dimension)
        return chunks, positions, snap.vectors.raw(positions)

    def _take(
        self, snap: Snapshot, positions: IntArray, columns: list[str]
    ) -> tuple[IntArray, pa.Table]:
        """(the positions whose rows LanceDB still has, their ``columns`` in that
        order), read by row id from ``snap``'s pinned handle in one take."""
        wanted = snap.rowids[positions]
        take = snap.handle.get().take_row_ids(wanted.tolist()).select(columns).with_row_id()
        disk: pa.Table = self._run(take.to_arrow())
        got = disk.column("_rowid").to_numpy().astype(np.uint64)
        order = np.argsort(got, kind="stable")
        at = np.minimum(np.searchsorted(got[order], wanted), max(len(got) - 1, 0))
        found = got[order][at] == wanted if len(got) else np.zeros(len(wanted), bool)
        return positions[found], disk.take(order[at[found]])
