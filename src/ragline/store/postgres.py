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
  tokeniser and formula of :mod:`ragline.store.bm25` (LanceDB's, so scores
  agree across stores). No extension beyond pgvector is needed. Queries skip
  most postings of common terms by MaxScore pruning that keeps the top-k exact
  (:mod:`ragline.store.postgres_bm25`).
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

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.retry import RetryPolicy
from ragline.store import bm25, postgres_bm25
from ragline.store.base import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    ClosesOnExit,
    DocumentWrite,
    FieldBoosts,
    SearchDefaults,
    StoreError,
    check_vectors,
    check_writes,
    chunk_from_row,
    metadata_json,
)
from ragline.store.filters import to_sql_predicate
from ragline.types import Chunk, DocumentRecord, Filters

T = TypeVar("T")

#: Advisory lock key of schema migrations (any constant both processes agree on).
MIGRATION_LOCK = 0x7261_676C_696E_6501
MIGRATIONS_TABLE = "ragline_schema_migrations"
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
#: Longest keyword query kept, in characters (as LanceStore).
_MAX_QUERY_CHARS = 2000

_CHUNK_SELECT = ", ".join(f"ch.{c}" for c in CHUNK_COLUMNS)
#: COPY column list and binary types of a chunk row.
_CHUNK_COPY = (
    ("key", "int8"),
    *((c, "text") for c in CHUNK_COLUMNS[:7]),
    ("heading_path", "text[]"),
    *((c, "text") for c in ("url", "anchor")),
    ("chunk_index", "int4"),
    ("start_char", "int8"),
    ("end_char", "int8"),
    ("token_count", "int4"),
    ("word_count", "int4"),
    ("has_code", "bool"),
    ("has_equations", "bool"),
    ("content_hash", "text"),
    ("created_at", "text"),
    ("text", "text"),
    ("page", "int4"),
    ("metadata", "jsonb"),
    ("len_title", "int4"),
    ("len_headings", "int4"),
    ("len_text", "int4"),
    ("embedding", "vector"),
)


# --------------------------------------------------------------------- pure


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    """The packaged migrations in version order (``NNNN_name.sql``; numbers must not repeat)."""
    found: list[Migration] = []
    for entry in resources.files("ragline.store.migrations").iterdir():
        m = _MIGRATION_FILE.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if len(set(versions)) != len(versions):
        raise StoreError(f"duplicate migration versions in ragline.store.migrations: {versions}")
    return found


def redact_url(url: str) -> str:
    """``host:port/db`` of a connection URL: errors name the server, never the password."""
    try:
        parts = urlsplit(url)
        where = parts.hostname or "localhost"
        if parts.port:
            where += f":{parts.port}"
        return f"{where}{parts.path or ''}"
    except ValueError:
        return "(unparsable database URL)"


@dataclass(frozen=True, slots=True)
class ChunkTerms:
    """A chunk's BM25 postings: term → (tf title, tf headings, tf text), and field lengths."""

    postings: dict[str, tuple[int, int, int]]
    lengths: tuple[int, int, int]

    @classmethod
    def of(cls, chunk: Chunk) -> ChunkTerms:
        fields = bm25.chunk_terms(chunk)
        title, headings, text = (fields[f] for f in bm25.KEYWORD_FIELDS)
        terms = set(title.tf) | set(headings.tf) | set(text.tf)
        postings = {
            t: (title.tf.get(t, 0), headings.tf.get(t, 0), text.tf.get(t, 0)) for t in terms
        }
        return cls(postings, (title.length, headings.length, text.length))


def df_deltas(terms: Iterable[ChunkTerms]) -> dict[str, tuple[int, int, int]]:
    """Per term, in how many of these chunks it occurs in each field."""
    out: dict[str, list[int]] = {}
    for ct in terms:
        for term, tfs in ct.postings.items():
            acc = out.setdefault(term, [0, 0, 0])
            for i, tf in enumerate(tfs):
                if tf:
                    acc[i] += 1
    return {t: (a[0], a[1], a[2]) for t, a in out.items()}


def _as_array(value: Any) -> Vectors:
    """A vector column value (pgvector's ``Vector`` or an array) as float32 numpy."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def _row_to_chunk(row: Sequence[Any]) -> Chunk:
    return chunk_from_row(row[: len(CHUNK_COLUMNS)])


def _metadata_json(chunk: Chunk) -> Jsonb:
    # default=str: YAML front matter may hold dates; they come back as strings (as LanceStore).
    return Jsonb(json.loads(metadata_json(chunk.metadata)))


# --------------------------------------------------------------------- store


class PostgresStore(SearchDefaults, ClosesOnExit):
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
        bm25_probe_postings: int = postgres_bm25.PROBE_POSTINGS,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if pool_size < 1 or hnsw_m < 2 or hnsw_ef_construction < 1 or ef_search < 1:
            raise ValueError("pool_size ≥ 1, hnsw_m ≥ 2, ef_construction and ef_search ≥ 1")
        if statement_timeout_s < 0 or write_timeout_s < 0 or connect_timeout_s <= 0:
            raise ValueError("timeouts must be ≥ 0 (connect_timeout_s > 0)")
        if ann_min_rows < 0:
            raise ValueError("ann_min_rows must be ≥ 0")
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
        #: MaxScore pruning (exact; False: score every posting, the reference).
        self.bm25_prune = bm25_prune
        self.bm25_probe_postings = bm25_probe_postings
        self._dimension = dimension
        self._closed = False
        self._attempt(lambda: self._migrate(), "applying schema migrations", connect=True)
        self._pool = self._make_pool(url, pool_size, "write")
        self._read_pool = (
            self._make_pool(self.read_url, pool_size, "read")
            if self.read_url and self.read_url != url
            else self._pool
        )
        fp = self.stored_fingerprint()
        if fp is not None:
            self._dimension = fp.dimension

    # ---------------------------------------------------------------- plumbing

    def _make_pool(self, url: str, size: int, name: str) -> ConnectionPool:
        timeout_ms = round(self.statement_timeout_s * 1000)

        def configure(conn: psycopg.Connection[Any]) -> None:
            if self.schema:
                conn.execute(
                    "SELECT set_config('search_path', %s || ', ' || "
                    "current_setting('search_path'), false)",
                    (self.schema,),
                )
            register_vector(conn)
            conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{timeout_ms}",))

        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, round(self.connect_timeout_s)),
                "application_name": "ragline",
            },
            configure=configure,
            check=ConnectionPool.check_connection,
            name=f"ragline-{name}",
            open=False,
        )
        pool.open(wait=False)
        return pool

    def _attempt(self, fn: Callable[[], T], what: str, *, connect: bool = False) -> T:
        """Run ``fn``; on a lost or refused connection retry with backoff, then fail
        with a StoreError naming the server and what was being done."""
        attempt = 0
        while True:
            if self._closed:
                raise StoreError(f"PostgreSQL {self.where}: the store is closed")
            try:
                return fn()
            except StoreError:
                raise
            except pg_errors.QueryCanceled as exc:
                raise StoreError(
                    f"PostgreSQL {self.where}: {what}: cancelled by the statement timeout "
                    f"(RAGLINE_PG_STATEMENT_TIMEOUT_S {self.statement_timeout_s:g} s, writes "
                    f"RAGLINE_PG_WRITE_TIMEOUT_S {self.write_timeout_s:g} s): {exc}"
                ) from exc
            except (
                psycopg.OperationalError,
                psycopg.InterfaceError,
                pg_errors.TransactionRollback,
                PoolTimeout,
            ) as exc:
                delay = self.retry.delay(attempt, random.random())
                if attempt >= self.retry.max_retries or delay is None:
                    kind = "cannot connect" if connect else "connection lost"
                    raise StoreError(
                        f"PostgreSQL {self.where}: {kind} while {what} "
                        f"(gave up after {attempt + 1} attempts): {str(exc).strip()}"
                    ) from exc
                attempt += 1
                time.sleep(delay)
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL {self.where}: {what} failed: {exc}") from exc

    def _run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, read: bool = False) -> T:
        pool = self._read_pool if read else self._pool

        def once() -> T:
            with pool.connection(timeout=self.connect_timeout_s) as conn:
                return fn(conn)

        return self._attempt(once, what)

    def _write_timeout(self, conn: psycopg.Connection[Any]) -> None:
        """A write batch (COPY of its chunks and postings) gets ``write_timeout_s``."""
        conn.execute(
            "SELECT set_config('statement_timeout', %s, true)",
            (f"{round(self.write_timeout_s * 1000)}",),
        )

    def _migrate(self) -> None:
        with psycopg.connect(
            self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout_s))
        ) as conn:
            apply_migrations(conn, self.schema)

    # ------------------------------------------------------------ fingerprint

    @property
    def dimension(self) -> int:
        return self._dimension

    def stored_fingerprint(self) -> ModelFingerprint | None:
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

    def set_fingerprint(self, fingerprint: ModelFingerprint) -> None:
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
                _set_meta(conn, "fingerprint", fingerprint.to_dict())

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
        rows: list[tuple[Chunk, Vectors, ChunkTerms]] = [
            (c, v, ChunkTerms.of(c))
            for item, vecs in zip(items, checked, strict=True)
            for c, v in zip(item.chunks, vecs, strict=True)
        ]
        records = [item.record for item in items]

        def write(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._write_timeout(conn)
                _lock_writers(conn)
                _remove_chunks(conn, doc_ids)
                _insert_chunks(conn, rows)
                _upsert_documents(conn, records)

        first = items[0].record.source
        self._run(write, f"writing {len(items)} document(s) ({first}, …)")

    def delete_document(self, doc_id: str) -> None:
        def delete(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                self._write_timeout(conn)
                _lock_writers(conn)
                _remove_chunks(conn, [doc_id])
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
                _lock_writers(conn)
                conn.execute("DELETE FROM ragline_postings")
                conn.execute("DELETE FROM ragline_chunks")
                conn.execute("DELETE FROM ragline_terms")
                conn.execute(
                    "UPDATE ragline_corpus SET chunks = 0, n_title = 0, n_headings = 0, "
                    "n_text = 0, len_title = 0, len_headings = 0, len_text = 0"
                )
                for chunks, vectors in batches:
                    if not chunks:
                        continue
                    vecs = check_vectors(vectors, len(chunks), dimension, "rebuild batch")
                    _insert_chunks(
                        conn,
                        [(c, v, ChunkTerms.of(c)) for c, v in zip(chunks, vecs, strict=True)],
                    )
                    count += len(chunks)
                if count >= self.ann_min_rows:
                    self._create_hnsw(conn, dimension)
                if dimension != old_dimension:
                    conn.execute(f"DROP INDEX IF EXISTS {_hnsw_name(old_dimension)}")
                _set_meta(conn, "fingerprint", fingerprint.to_dict())
            return count

        # Not retried: the batches are a one-shot iterator.
        try:
            with self._pool.connection(timeout=self.connect_timeout_s) as conn:
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
        records.sort(key=lambda r: (r.tenant, r.source, r.doc_id))
        return records

    def document_vectors(self, doc_id: str) -> dict[str, Vectors]:
        def read(conn: psycopg.Connection[Any]) -> dict[str, Vectors]:
            cur = conn.execute(
                "SELECT content_hash, embedding FROM ragline_chunks WHERE doc_id = %s", (doc_id,)
            )
            return {h: _as_array(v) for h, v in cur.fetchall()}

        return self._run(read, f"reading vectors of document {doc_id!r}")

    def vectors_for(self, ids: Sequence[str]) -> dict[str, Vectors]:
        if not ids:
            return {}
        unique = list(dict.fromkeys(ids))

        def read(conn: psycopg.Connection[Any]) -> dict[str, Vectors]:
            cur = conn.execute(
                "SELECT id, embedding FROM ragline_chunks WHERE id = ANY(%s)", (unique,)
            )
            return {i: _as_array(v) for i, v in cur.fetchall()}

        return self._run(read, "reading chunk vectors", read=True)

    def chunks_by_index(self, doc_id: str, indices: Sequence[int]) -> list[Chunk]:
        wanted = sorted({int(i) for i in indices})
        if not wanted:
            return []

        def read(conn: psycopg.Connection[Any]) -> list[Chunk]:
            cur = conn.execute(
                f"SELECT {_CHUNK_SELECT} FROM ragline_chunks ch "
                "WHERE ch.doc_id = %s AND ch.chunk_index = ANY(%s) ORDER BY ch.chunk_index",
                (doc_id, wanted),
            )
            return [_row_to_chunk(r) for r in cur.fetchall()]

        return self._run(read, f"reading chunks of document {doc_id!r}", read=True)

    def count_chunks(self, filters: Filters | None = None) -> int:
        pred = to_sql_predicate(filters, jsonb=True)
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
                self._pool.connection(timeout=self.connect_timeout_s) as conn,
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

    def vector_candidates(
        self, query: Vectors, k: int, filters: Filters | None = None
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        dim = self._dimension
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != dim:
            raise StoreError(f"query vector has dimension {q.shape[0]} but the index stores {dim}")
        if not np.isfinite(q).all():
            raise StoreError("query vector contains NaN or infinite values")
        pred = to_sql_predicate(filters, jsonb=True)
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

    def keyword_candidates(
        self,
        query: str,
        k: int,
        filters: Filters | None = None,
        boosts: FieldBoosts | None = None,
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        counts = bm25.query_counts(query[:_MAX_QUERY_CHARS])
        if not counts:
            return []
        b = boosts or FieldBoosts()
        if max(b.title, b.headings, b.text) <= 0:
            return []
        pred = to_sql_predicate(filters, jsonb=True)

        def read(conn: psycopg.Connection[Any]) -> list[tuple[str, float]]:
            with conn.transaction():
                return postgres_bm25.top_k(
                    conn,
                    counts,
                    k,
                    pred,
                    b,
                    self.k1,
                    self.b,
                    prune=self.bm25_prune,
                    probe_postings=self.bm25_probe_postings,
                )

        return self._run(read, "keyword search", read=True)

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
            f"CREATE INDEX IF NOT EXISTS {_hnsw_name(dimension)} ON ragline_chunks "
            f"USING hnsw ((embedding::vector({dimension})) vector_cosine_ops) "
            f"WITH (m = {int(self.hnsw_m)}, ef_construction = {int(self.hnsw_ef_construction)}) "
            f"WHERE vector_dims(embedding) = {dimension}"
        )

    def optimize(self) -> None:
        """Build the HNSW index once the table reaches ``ann_min_rows`` (HNSW then
        follows every insert), vacuum and refresh the planner's statistics."""
        dimension = self._dimension

        def run(conn: psycopg.Connection[Any]) -> None:
            row = conn.execute("SELECT chunks FROM ragline_corpus").fetchone()
            rows = int(row[0]) if row else 0
            if rows >= self.ann_min_rows:
                with conn.transaction():
                    conn.execute("SELECT set_config('statement_timeout', '0', true)")
                    self._create_hnsw(conn, dimension)
            # VACUUM marks pages all-visible, so BM25 reads postings index-only.
            for table in ("ragline_chunks", "ragline_postings", "ragline_terms"):
                conn.execute(f"VACUUM (ANALYZE) {table}")

        self._run(run, "optimizing the index")

    def has_vector_index(self) -> bool:
        """Whether the HNSW index of the current dimension exists (status, tests)."""
        name = _hnsw_name(self._dimension)

        def read(conn: psycopg.Connection[Any]) -> bool:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
            return bool(row and row[0])

        return self._run(read, "inspecting indexes")

    def close(self) -> None:
        """Close the pools; later calls raise StoreError."""
        if self._closed:
            return
        self._closed = True
        if self._read_pool is not self._pool:
            self._read_pool.close()
        self._pool.close()


# ------------------------------------------------------------ SQL helpers


def apply_migrations(
    conn: psycopg.Connection[Any],
    schema: str | None = None,
    migrations: Sequence[Migration] | None = None,
) -> list[int]:
    """Apply the pending migrations in one transaction under an advisory lock;
    returns the versions applied (empty when the schema is current).

    pgvector is created first, with the connection's own search path (it is one
    per database; managed services often keep it in an ``extensions`` schema),
    then ragline's tables go into ``schema`` (created if missing) when given."""
    wanted = list(migrations) if migrations is not None else load_migrations()
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as exc:
            raise StoreError(
                f"pgvector is required: CREATE EXTENSION vector failed ({exc}); install "
                "pgvector on the server (managed services: enable the 'vector' extension)"
            ) from exc
        if schema:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {check_schema(schema)}")
            conn.execute(
                "SELECT set_config('search_path', %s || ', ' || current_setting('search_path'), "
                "true)",
                (schema,),
            )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
            "version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {int(v) for (v,) in conn.execute(f"SELECT version FROM {MIGRATIONS_TABLE}")}
        latest = max((m.version for m in wanted), default=0)
        if done and max(done) > latest:
            raise StoreError(
                f"the database schema is at version {max(done)}, newer than this ragline "
                f"knows ({latest}); upgrade ragline"
            )
        for mig in wanted:
            if mig.version in done:
                continue
            try:
                conn.execute(mig.sql.encode("utf-8"))
            except psycopg.Error as exc:
                raise StoreError(
                    f"migration {mig.version:04d}_{mig.name}.sql failed: {exc}"
                ) from exc
            conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES (%s, %s)",
                (mig.version, mig.name),
            )
            applied_now.append(mig.version)
    return applied_now


def check_schema(name: str) -> str:
    """A schema name ragline may put in SQL unquoted (lower-case identifier), or ValueError."""
    if not _SCHEMA.match(name):
        raise ValueError(
            f"schema {name!r} must be a lower-case identifier ([a-z_][a-z0-9_]*, ≤ 63 chars)"
        )
    return name


def _hnsw_name(dimension: int) -> str:
    return f"ragline_chunks_hnsw_{int(dimension)}"


def _set_meta(conn: psycopg.Connection[Any], key: str, value: Any) -> None:
    conn.execute(
        "INSERT INTO ragline_meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (key, Jsonb(value)),
    )


def _lock_writers(conn: psycopg.Connection[Any]) -> None:
    """Serialise writers on the corpus row before any term row is touched."""
    conn.execute("SELECT 1 FROM ragline_corpus FOR UPDATE")


def _remove_chunks(conn: psycopg.Connection[Any], doc_ids: Sequence[str]) -> None:
    """Delete the documents' chunks and postings and subtract them from the statistics."""
    ids = list(doc_ids)
    gone_terms = conn.execute(
        """
        UPDATE ragline_terms t
        SET df_title = t.df_title - d.df_title,
            df_headings = t.df_headings - d.df_headings,
            df_text = t.df_text - d.df_text
        FROM (
            SELECT p.term,
                   count(*) FILTER (WHERE p.tf_title > 0) AS df_title,
                   count(*) FILTER (WHERE p.tf_headings > 0) AS df_headings,
                   count(*) FILTER (WHERE p.tf_text > 0) AS df_text
            FROM ragline_postings p
            WHERE p.chunk_key IN (SELECT key FROM ragline_chunks WHERE doc_id = ANY(%s))
            GROUP BY p.term
        ) d
        WHERE t.term = d.term
        RETURNING t.term, t.df_title, t.df_headings, t.df_text
        """,
        (ids,),
    ).fetchall()
    empty = [t for t, a, h, x in gone_terms if a <= 0 and h <= 0 and x <= 0]
    if empty:
        conn.execute("DELETE FROM ragline_terms WHERE term = ANY(%s)", (empty,))
    conn.execute(
        "DELETE FROM ragline_postings WHERE chunk_key IN "
        "(SELECT key FROM ragline_chunks WHERE doc_id = ANY(%s))",
        (ids,),
    )
    conn.execute(
        """
        WITH gone AS (
            DELETE FROM ragline_chunks WHERE doc_id = ANY(%s)
            RETURNING len_title, len_headings, len_text
        )
        UPDATE ragline_corpus SET
            chunks = chunks - (SELECT count(*) FROM gone),
            n_title = n_title - (SELECT count(*) FROM gone WHERE len_title > 0),
            n_headings = n_headings - (SELECT count(*) FROM gone WHERE len_headings > 0),
            n_text = n_text - (SELECT count(*) FROM gone WHERE len_text > 0),
            len_title = len_title - (SELECT coalesce(sum(len_title), 0) FROM gone),
            len_headings = len_headings - (SELECT coalesce(sum(len_headings), 0) FROM gone),
            len_text = len_text - (SELECT coalesce(sum(len_text), 0) FROM gone)
        """,
        (ids,),
    )


def _insert_chunks(
    conn: psycopg.Connection[Any], rows: Sequence[tuple[Chunk, Vectors, ChunkTerms]]
) -> None:
    """COPY chunks and postings in, add them to the statistics."""
    if not rows:
        return
    keys = [
        int(k)
        for (k,) in conn.execute(
            "SELECT nextval('ragline_chunk_key') FROM generate_series(1, %s)", (len(rows),)
        ).fetchall()
    ]
    columns = ", ".join(name for name, _ in _CHUNK_COPY)
    with conn.cursor() as cur:
        with cur.copy(f"COPY ragline_chunks ({columns}) FROM STDIN WITH (FORMAT BINARY)") as cp:
            cp.set_types([t for _, t in _CHUNK_COPY])
            for key, (c, v, ct) in zip(keys, rows, strict=True):
                cp.write_row(
                    (
                        key,
                        c.id,
                        c.doc_id,
                        c.tenant,
                        c.source,
                        c.title,
                        c.chapter,
                        c.section,
                        list(c.heading_path),
                        c.url,
                        c.anchor,
                        c.chunk_index,
                        c.start_char,
                        c.end_char,
                        c.token_count,
                        c.word_count,
                        c.has_code,
                        c.has_equations,
                        c.content_hash,
                        c.created_at,
                        c.text,
                        c.page,
                        _metadata_json(c),
                        *ct.lengths,
                        np.asarray(v, dtype=np.float32),
                    )
                )
        with cur.copy(
            "COPY ragline_postings (term, chunk_key, tf_title, tf_headings, tf_text, "
            "len_title, len_headings, len_text) FROM STDIN WITH (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["text", "int8", "int4", "int4", "int4", "int4", "int4", "int4"])
            for key, (_, _, ct) in zip(keys, rows, strict=True):
                for term, tfs in ct.postings.items():
                    cp.write_row((term, key, *tfs, *ct.lengths))
    deltas = df_deltas(ct for _, _, ct in rows)
    terms = sorted(deltas)
    conn.execute(
        """
        INSERT INTO ragline_terms (term, df_title, df_headings, df_text)
        SELECT * FROM unnest(%s::text[], %s::int[], %s::int[], %s::int[])
        ON CONFLICT (term) DO UPDATE SET
            df_title = ragline_terms.df_title + EXCLUDED.df_title,
            df_headings = ragline_terms.df_headings + EXCLUDED.df_headings,
            df_text = ragline_terms.df_text + EXCLUDED.df_text
        """,
        (
            terms,
            [deltas[t][0] for t in terms],
            [deltas[t][1] for t in terms],
            [deltas[t][2] for t in terms],
        ),
    )
    sums = Counter[int]()
    nonempty = Counter[int]()
    for _, _, ct in rows:
        for i, n in enumerate(ct.lengths):
            sums[i] += n
            nonempty[i] += n > 0
    conn.execute(
        "UPDATE ragline_corpus SET chunks = chunks + %s, "
        "n_title = n_title + %s, n_headings = n_headings + %s, n_text = n_text + %s, "
        "len_title = len_title + %s, len_headings = len_headings + %s, len_text = len_text + %s",
        (len(rows), nonempty[0], nonempty[1], nonempty[2], sums[0], sums[1], sums[2]),
    )


def _upsert_documents(conn: psycopg.Connection[Any], records: Sequence[DocumentRecord]) -> None:
    cols = ", ".join(DOCUMENT_COLUMNS)
    marks = ", ".join(["%s"] * len(DOCUMENT_COLUMNS))
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in DOCUMENT_COLUMNS[1:])
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO ragline_documents ({cols}) VALUES ({marks}) "
            f"ON CONFLICT (doc_id) DO UPDATE SET {updates}",
            [tuple(getattr(r, c) for c in DOCUMENT_COLUMNS) for r in records],
        )
