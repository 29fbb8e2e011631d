"""PostgresStore: the index in PostgreSQL with pgvector (self-hosted, Supabase, Neon, RDS…).

Why it is built the way it is:

* Schema by versioned migrations (``ragline/store/migrations/NNNN_*.sql``),
  applied at open under an advisory lock, so two processes starting together
  never race; ``ragline_schema_migrations`` records what ran. A database
  migrated by a newer ragline is refused, not guessed at.
* Exact BM25, not ``ts_rank``: ragline keeps its own term statistics. Every
  chunk has one posting per distinct term (its frequency in title, headings and
  text, and the fields' lengths), ``ragline_terms`` holds each term's document
  frequency per field and ``ragline_corpus`` the chunk count and summed field
  lengths. Every write updates all three in the same transaction as the chunks,
  so a query computes idf and avgdl from exact, current statistics, with the
  tokeniser and formula of :mod:`ragline.text.bm25` (LanceDB's, so scores
  agree across stores). No extension beyond pgvector is needed. By default a
  query reads each term's postings packed in parts by impact (written by
  :meth:`optimize`) plus the rows of newer chunks, and scores them in numpy,
  bit for bit as the exhaustive SQL statement would, skipping the parts whose
  bounds cannot lift a chunk into the top-k (MaxScore); the SQL scorer with
  MaxScore pruning remains (``bm25_scorer="sql"``): :mod:`.bm25_packed` and
  :mod:`.bm25_sql`.
* Vectors: an HNSW index (cosine, ``m``/``ef_construction``) on
  ``embedding::vector(<dim>)`` restricted to rows of that dimension, built by
  :meth:`optimize` once the table reaches ``ann_min_rows`` (below that a scan is
  exact); ``hnsw.ef_search`` is set per query with ``SET LOCAL``, with pgvector's
  iterative scan so a filtered query still fills its top-k.
* Atomic writes: ``replace_documents`` deletes the documents' old chunks and
  postings, inserts the new ones (binary COPY), adjusts the statistics and
  upserts the records in ONE transaction; a crash or a lost connection leaves
  the old state, and retrying the call is idempotent. Writers serialise on the
  corpus row (taken first, so they cannot deadlock on term rows).
* Connections: a pool per URL (``psycopg_pool``); reads that serve searches go
  to ``read_url`` (a streaming replica) when one is given, everything a write
  depends on (documents, fingerprint, counts) to the primary. Connection loss
  is retried with exponential backoff (:class:`ragline.retry.RetryPolicy`); a
  statement timeout bounds every query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg_pool import PoolTimeout

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.retry import RetryPolicy
from ragline.store.base import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    CandidateQuery,
    DocumentWrite,
    Ranking,
    StoreAbilities,
    StoreError,
    check_vectors,
    check_writes,
    chunk_from_row,
    listing_order,
    positions,
)
from ragline.store.filter_sql import chunk_predicate
from ragline.store.postgres import bm25_packed, bm25_sql, writes
from ragline.store.postgres.bm25_formula import Formula
from ragline.store.postgres.bm25_query import SCORERS, KeywordQuery
from ragline.store.postgres.pool import Connections, redact_url
from ragline.store.postgres.schema import apply_migrations, check_schema, hnsw_name
from ragline.store.remote import StoreFront, query_vector
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, FieldBoosts, Filters

T = TypeVar("T")

#: Longest keyword query kept, in characters (as LanceStore).
_MAX_QUERY_CHARS = 2000
_CHUNK_SELECT = ", ".join(f"ch.{c}" for c in CHUNK_COLUMNS)


# --------------------------------------------------------------------- pure


def _as_array(value: Any) -> Vectors:
    """A vector column value (pgvector's ``Vector`` or an array) as float32 numpy."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def _row_to_chunk(row: Sequence[Any]) -> Chunk:
    return chunk_from_row(row[: len(CHUNK_COLUMNS)])


# --------------------------------------------------------------------- store


def _with_params(pred: str) -> str:
    """A filter predicate for a statement that also has psycopg parameters: its
    literals' ``%`` doubled, or psycopg would read ``'100%-sure'`` as a placeholder.
    (A statement without parameters is sent as written: use the predicate as is.)"""
    return pred.replace("%", "%%")


class PostgresStore(StoreFront):
    """The :class:`~ragline.store.base.Store` in a PostgreSQL database with pgvector.

    ``url`` is the primary (every write, and reads a write depends on);
    ``read_url`` a replica for search reads. ``dimension`` is the vector size
    for a new index; a database that already holds a model keeps its own.
    Thread-safe (a pool per URL); any number of processes may share a database.
    """

    def __init__(
        self,
        url: str,
        *,
        dimension: int,
        read_url: str | None = None,
        schema: str | None = None,
        pool_size: int = 8,
        statement_timeout_s: float = 30.0,
        write_timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        max_retries: int = 4,
        retry_base_s: float = 0.25,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        ef_search: int = 100,
        ann_min_rows: int = 50_000,
        maintenance_work_mem_mb: int = 512,
        k1: float = bm25.K1,
        b: float = bm25.B,
        bm25_prune: bool = True,
        bm25_probe_postings: int = bm25_sql.PROBE_POSTINGS,
        bm25_scorer: str = "numpy",
        bm25_repack_fraction: float = bm25_packed.REPACK_FRACTION,
        bm25_numpy_probe_postings: int = bm25_packed.NUMPY_PROBE_POSTINGS,
        bm25_numpy_prune_min_postings: int = bm25_packed.NUMPY_PRUNE_MIN_POSTINGS,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if pool_size < 1 or hnsw_m < 2 or hnsw_ef_construction < 1 or ef_search < 1:
            raise ValueError("pool_size ≥ 1, hnsw_m ≥ 2, ef_construction and ef_search ≥ 1")
        if statement_timeout_s < 0 or write_timeout_s < 0 or connect_timeout_s <= 0:
            raise ValueError("timeouts must be ≥ 0 (connect_timeout_s > 0)")
        if ann_min_rows < 0:
            raise ValueError("ann_min_rows must be ≥ 0")
        if not 0 <= bm25_repack_fraction <= 1:
            raise ValueError(f"bm25_repack_fraction must be in [0, 1], got {bm25_repack_fraction}")
        if bm25_scorer not in SCORERS:
            raise ValueError(f"bm25_scorer must be one of {SCORERS}, got {bm25_scorer!r}")
        self.url = url
        self.read_url = read_url or None
        self.schema = check_schema(schema) if schema else None
        self.where = redact_url(url)
        self.statement_timeout_s = statement_timeout_s
        self.write_timeout_s = write_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retry = RetryPolicy(
            max_retries=max_retries, base_s=retry_base_s, cap_s=max(retry_base_s, 5.0)
        )
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.ef_search = ef_search
        self.ann_min_rows = ann_min_rows
        self.maintenance_work_mem_mb = maintenance_work_mem_mb
        self.k1 = k1
        self.b = b
        #: Where BM25 is scored (:data:`~ragline.store.postgres.bm25_query.SCORERS`);
        #: every scorer gives the exhaustive SQL statement's top-k.
        self.bm25_scorer = bm25_scorer
        #: MaxScore pruning, for either scorer (False: score every posting).
        self.bm25_prune = bm25_prune
        self.bm25_probe_postings = bm25_probe_postings
        #: optimize() packs the postings again once this share of the chunks
        #: was written or deleted since the last packing.
        self.bm25_repack_fraction = bm25_repack_fraction
        #: Postings the numpy scorer's threshold probe scores (bm25_packed.prune_candidates).
        self.bm25_numpy_probe_postings = bm25_numpy_probe_postings
        #: Queries with fewer postings are scored in full (bm25_packed.NUMPY_PRUNE_MIN_POSTINGS).
        self.bm25_numpy_prune_min_postings = bm25_numpy_prune_min_postings
        self._formula = Formula(k1, b)
        self._dimension = dimension
        self._db = Connections(
            url,
            self.read_url,
            self.schema,
            pool_size=pool_size,
            statement_timeout_s=statement_timeout_s,
            write_timeout_s=write_timeout_s,
            connect_timeout_s=connect_timeout_s,
            retry=self.retry,
        )
        self._db.attempt(lambda: self._migrate(), "applying schema migrations", connect=True)
        self._db.open()
        fp = self._stored_fingerprint()
        if fp is not None:
            self._dimension = fp.dimension

        self.abilities = StoreAbilities(vectors=self.vectors_for)

    # ---------------------------------------------------------------- plumbing

    def _run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, read: bool = False) -> T:
        return self._db.run(fn, what, read)

    def _migrate(self) -> None:
        with psycopg.connect(
            self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout_s))
        ) as conn:
            apply_migrations(conn, self.schema)

    # ------------------------------------------------------------ fingerprint

    @property
    def dimension(self) -> int:
        return self._dimension

    def _stored_fingerprint(self) -> ModelFingerprint | None:
        def read(conn: psycopg.Connection[Any]) -> Any:
            row = conn.execute(
                "SELECT value FROM ragline_meta WHERE key = 'fingerprint'"
            ).fetchone()
            return row[0] if row else None

        value = self._run(read, "reading the model fingerprint")
        if value is None:
            return None
        fp = ModelFingerprint.from_dict(value)
        self._dimension = fp.dimension
        return fp

    def _record_fingerprint(self, fingerprint: ModelFingerprint) -> None:
        """Record the model; an empty index simply takes the model's dimension."""

        def write(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("SELECT 1 FROM ragline_corpus FOR UPDATE")
                (rows,) = conn.execute("SELECT count(*) FROM ragline_chunks").fetchone() or (0,)
                if rows and fingerprint.dimension != self._dimension:
                    raise StoreError(
                        f"model {fingerprint.name!r} makes {fingerprint.dimension}-dim vectors "
                        f"but the index stores {self._dimension}-dim ones; use rebuild() to "
                        "change models"
                    )
                writes.set_meta(conn, "fingerprint", fingerprint.to_dict())

        self._run(write, "recording the model fingerprint")
        self._dimension = fingerprint.dimension

    # ------------------------------------------------------------------ writes

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        """The whole batch (old chunks out, new chunks in, statistics, records) in
        one transaction; retried as a whole on connection loss (idempotent)."""
        if not items:
            return
        checked = check_writes(items, self._dimension)
        doc_ids = [item.record.doc_id for item in items]
        rows: list[tuple[Chunk, Vectors, writes.ChunkTerms]] = [
            (c, v, writes.ChunkTerms.of(c))
            for item, vecs in zip(items, checked, strict=True)
            for c, v in zip(item.chunks, vecs, strict=True)
        ]
        records = [item.record for item in items]

        def write(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._db.write_timeout(conn)
                writes.lock_writers(conn)
                writes.remove_chunks(conn, doc_ids)
                writes.insert_chunks(conn, rows)
                writes.upsert_documents(conn, records)

        first = items[0].record.source
        self._run(write, f"writing {len(items)} document(s) ({first}, …)")

    def delete_document(self, doc_id: str) -> None:
        def delete(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._db.write_timeout(conn)
                writes.lock_writers(conn)
                writes.remove_chunks(conn, [doc_id])
                conn.execute("DELETE FROM ragline_documents WHERE doc_id = %s", (doc_id,))

        self._run(delete, f"deleting document {doc_id!r}")

    def rebuild(
        self,
        fingerprint: ModelFingerprint,
        batches: Iterable[tuple[list[Chunk], Vectors]],
    ) -> int:
        """Every chunk again with new vectors, in ONE transaction: searches read the
        old rows until it commits. When the dimension changes, the new HNSW index
        is built before the old one is dropped (readers wait only for that drop)."""
        dimension = fingerprint.dimension
        old_dimension = self._dimension

        def run(conn: psycopg.Connection[Any]) -> int:
            count = 0
            with conn.transaction():
                conn.execute("SELECT set_config('statement_timeout', '0', true)")
                writes.lock_writers(conn)
                conn.execute("DELETE FROM ragline_postings")
                conn.execute("DELETE FROM ragline_chunks")
                conn.execute("DELETE FROM ragline_terms")
                bm25_packed.forget_packed(conn)
                conn.execute(
                    "UPDATE ragline_corpus SET chunks = 0, n_title = 0, n_headings = 0, "
                    "n_text = 0, len_title = 0, len_headings = 0, len_text = 0"
                )
                for chunks, vectors in batches:
                    if not chunks:
                        continue
                    vecs = check_vectors(vectors, len(chunks), dimension, "rebuild batch")
                    writes.insert_chunks(
                        conn,
                        [
                            (c, v, writes.ChunkTerms.of(c))
                            for c, v in zip(chunks, vecs, strict=True)
                        ],
                    )
                    count += len(chunks)
                if count >= self.ann_min_rows:
                    self._create_hnsw(conn, dimension)
                if dimension != old_dimension:
                    conn.execute(f"DROP INDEX IF EXISTS {hnsw_name(old_dimension)}")
                writes.set_meta(conn, "fingerprint", fingerprint.to_dict())
            return count

        # Not retried: the batches are a one-shot iterator.
        try:
            with self._db.primary.connection(timeout=self.connect_timeout_s) as conn:
                n = run(conn)
        except StoreError:
            raise
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(f"PostgreSQL {self.where}: rebuild failed: {exc}") from exc
        self._dimension = dimension
        return n

    # ------------------------------------------------------------------ reads

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        cols = ", ".join(DOCUMENT_COLUMNS)

        def read(conn: psycopg.Connection[Any]) -> list[DocumentRecord]:
            if tenant is None:
                cur = conn.execute(f"SELECT {cols} FROM ragline_documents")
            else:
                cur = conn.execute(
                    f"SELECT {cols} FROM ragline_documents WHERE tenant = %s", (tenant,)
                )
            return [DocumentRecord(*row) for row in cur.fetchall()]

        records = self._run(read, "listing documents")
        return listing_order(records)

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        wanted = positions(indices)
        if wanted == []:
            return []

        def read(conn: psycopg.Connection[Any]) -> list[Chunk]:
            cur = conn.execute(
                f"SELECT {_CHUNK_SELECT} FROM ragline_chunks ch "
                "WHERE ch.doc_id = %s AND (%s::int[] IS NULL OR ch.chunk_index = ANY(%s)) "
                "ORDER BY ch.chunk_index",
                (doc_id, wanted, wanted),
            )
            return [_row_to_chunk(r) for r in cur.fetchall()]

        return self._run(read, f"reading chunks of document {doc_id!r}", read=True)

    def _count(self, filters: Filters | None = None) -> int:
        pred = chunk_predicate(filters, "postgres")
        where = f" WHERE {pred}" if pred else ""

        def read(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(f"SELECT count(*) FROM ragline_chunks{where}").fetchone()
            return int(row[0]) if row else 0

        return self._run(read, "counting chunks")

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        """Streams one snapshot of the table through a server-side cursor."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        try:
            with (
                self._db.primary.connection(timeout=self.connect_timeout_s) as conn,
                conn.transaction(),
                conn.cursor(name="ragline_iter_chunks") as cur,
            ):
                cur.execute(
                    f"SELECT {_CHUNK_SELECT}, ch.embedding FROM ragline_chunks ch ORDER BY ch.key"
                )
                while rows := cur.fetchmany(batch_size):
                    chunks = [_row_to_chunk(r) for r in rows]
                    yield chunks, np.stack([_as_array(r[-1]) for r in rows])
        except (psycopg.Error, PoolTimeout) as exc:
            raise StoreError(f"PostgreSQL {self.where}: reading every chunk failed: {exc}") from exc

    # ----------------------------------------------------------------- search

    def _cosine_top(self, query: CandidateQuery) -> Ranking:
        k = query.k
        if query.vector is None or k <= 0:
            return []
        dim = self._dimension
        q = query_vector(query.vector, dim)
        pred = _with_params(chunk_predicate(query.filters, "postgres"))
        extra = f" AND {pred}" if pred else ""
        sql = (
            f"SELECT ch.id, ch.embedding::vector({dim}) <=> %(q)s::vector({dim}) "
            f"FROM ragline_chunks ch WHERE vector_dims(ch.embedding) = {dim}{extra} "
            f"ORDER BY ch.embedding::vector({dim}) <=> %(q)s::vector({dim}) LIMIT %(k)s"
        )
        ef = max(self.ef_search, k)

        def read(conn: psycopg.Connection[Any]) -> list[tuple[str, float]]:
            with conn.transaction():
                conn.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true), "
                    "set_config('hnsw.iterative_scan', 'strict_order', true)",
                    (str(ef),),
                )
                rows = conn.execute(sql, {"q": q, "k": k}).fetchall()
            return [(str(r[0]), 1.0 - float(r[1])) for r in rows if r[1] is not None]

        return self._run(read, "vector search", read=True)

    def _bm25_top(self, query: CandidateQuery) -> Ranking:
        if query.k <= 0:
            return []
        counts = bm25.query_counts((query.text or "")[:_MAX_QUERY_CHARS])
        if not counts:
            return []
        b = query.boosts or FieldBoosts()
        if max(b.title, b.headings, b.text) <= 0:
            return []
        pred = _with_params(chunk_predicate(query.filters, "postgres"))
        q = KeywordQuery(counts, query.k, pred, b, prune=self.bm25_prune)

        def read(conn: psycopg.Connection[Any]) -> list[tuple[str, float]]:
            with conn.transaction():
                if self.bm25_scorer == "numpy":
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    return bm25_packed.client_top_k(
                        conn,
                        q,
                        self._formula,
                        probe_postings=self.bm25_numpy_probe_postings,
                        min_postings=self.bm25_numpy_prune_min_postings,
                    )
                return bm25_sql.top_k(
                    conn, q, self.k1, self.b, probe_postings=self.bm25_probe_postings
                )

        return self._run(read, "keyword search", read=True)

    def vectors_for(self, ids: Sequence[str]) -> dict[str, Vectors]:
        """Stored vectors by id without their chunks (``abilities.vectors``)."""
        if not ids:
            return {}
        unique = list(dict.fromkeys(ids))

        def read(conn: psycopg.Connection[Any]) -> dict[str, Vectors]:
            cur = conn.execute(
                "SELECT id, embedding FROM ragline_chunks WHERE id = ANY(%s)", (unique,)
            )
            return {i: _as_array(v) for i, v in cur.fetchall()}

        return self._run(read, "reading chunk vectors", read=True)

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        if not ids:
            return {}
        unique = list(dict.fromkeys(ids))

        def read(conn: psycopg.Connection[Any]) -> dict[str, tuple[Chunk, Vectors]]:
            cur = conn.execute(
                f"SELECT {_CHUNK_SELECT}, ch.embedding FROM ragline_chunks ch "
                "WHERE ch.id = ANY(%s)",
                (unique,),
            )
            out = {}
            for r in cur.fetchall():
                chunk = _row_to_chunk(r)
                out[chunk.id] = (chunk, _as_array(r[-1]))
            return out

        return self._run(read, "reading chunks", read=True)

    # ------------------------------------------------------------- maintenance

    def _create_hnsw(self, conn: psycopg.Connection[Any], dimension: int) -> None:
        conn.execute(
            "SELECT set_config('maintenance_work_mem', %s, true)",
            (f"{self.maintenance_work_mem_mb}MB",),
        )
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS {hnsw_name(dimension)} ON ragline_chunks "
            f"USING hnsw ((embedding::vector({dimension})) vector_cosine_ops) "
            f"WITH (m = {int(self.hnsw_m)}, ef_construction = {int(self.hnsw_ef_construction)}) "
            f"WHERE vector_dims(embedding) = {dimension}"
        )

    def optimize(self) -> None:
        """Build the HNSW index once the table reaches ``ann_min_rows`` (HNSW then
        follows every insert), pack the BM25 postings again when enough changed
        (:func:`~ragline.store.postgres.bm25_packed.repack`; writers wait meanwhile),
        vacuum and refresh the planner's statistics."""
        dimension = self._dimension

        def run(conn: psycopg.Connection[Any]) -> None:
            row = conn.execute("SELECT chunks FROM ragline_corpus").fetchone()
            rows = int(row[0]) if row else 0
            if rows >= self.ann_min_rows:
                with conn.transaction():
                    conn.execute("SELECT set_config('statement_timeout', '0', true)")
                    self._create_hnsw(conn, dimension)
            with conn.transaction():
                conn.execute("SELECT set_config('statement_timeout', '0', true)")
                writes.lock_writers(conn)
                bm25_packed.repack(conn, self.bm25_repack_fraction)
            # VACUUM marks pages all-visible, so BM25 reads postings index-only.
            for table in (
                "ragline_chunks",
                "ragline_postings",
                "ragline_terms",
                "ragline_term_postings",
            ):
                conn.execute(f"VACUUM (ANALYZE) {table}")

        self._run(run, "optimizing the index")

    def has_vector_index(self) -> bool:
        """Whether the HNSW index of the current dimension exists (status, tests)."""
        name = hnsw_name(self._dimension)

        def read(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
            return bool(row and row[0])

        return self._run(read, "inspecting indexes")

    def close(self) -> None:
        """Close the pools; later calls raise StoreError."""
        self._db.close()


# ------------------------------------------------------------ SQL helpers
