"""The query log: one row per API request, for operators, never a reason to fail one.

Each row holds what DESIGN.md asks for (query id, salted SHA-256 of the client
IP, the question's hash and, unless privacy mode is on, its text, the retrieved
chunk ids, the confidence, per-stage latencies, the status) plus what an operator
needs to read it (tenant, endpoint, generator, model, tokens, citation counts).

SQLite is the default store: one file next to the index, WAL mode (so several
worker processes append side by side), schema versioned with ``user_version``.
:meth:`SqliteQueryLog.write` never raises: a deleted, replaced, read-only, full or
locked database turns into ``False`` and a warning, and the request goes on. A
log file deleted while the server runs is noticed (its inode changes) and a new
one is started, so logging resumes on its own.

``QUERY_LOG_URL`` picks the store by scheme; :data:`QUERY_LOG_BACKENDS` is the
extension point (``postgres://`` and ``postgresql://`` are registered here and
need the ``psycopg`` package).
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ragline.errors import FaultError
from ragline.serve.feedback import (
    FEEDBACK_COLUMNS,
    SQLITE_FEEDBACK_DDL,
    FeedbackRow,
    from_feedback_record,
    postgres_feedback_ddl,
)
from ragline.settings import Settings
from ragline.types import Answer

log = logging.getLogger(__name__)

#: Version of the query log table; bump it and add a migration to change the table.
SCHEMA_VERSION = 3
SQLITE_FILE = "querylog.sqlite3"
SALT_FILE = "querylog.salt"
#: How often (seconds) a writer deletes rows past ``QUERY_LOG_RETENTION_DAYS``.
PRUNE_EVERY_S = 3600.0


class QueryLogError(FaultError):
    """The query log cannot be configured or read (writes never raise this)."""


@dataclass(slots=True)
class QueryLogRow:
    """One logged request. ``created_at`` is ISO 8601 in UTC (sortable as text)."""

    query_id: str
    created_at: str
    tenant: str
    endpoint: str
    ip_hash: str
    question_hash: str
    question: str | None = None  # None in privacy mode
    retrieved_chunk_ids: list[str] = field(default_factory=list)
    confidence_level: str | None = None
    confidence_score: float | None = None
    fallback: bool = False
    latencies_ms: dict[str, float] = field(default_factory=dict)
    status_code: int = 200
    error: str | None = None
    citations: int = 0
    citations_removed: int = 0  # markers naming no context block, dropped from the answer
    generator: str = ""
    model: str = ""
    total_tokens: int = 0
    citations_unsupported: int = 0  # kept but flagged by the support verifier
    #: seed 004's outcome: success | error | rate_limited | timeout (see status_label)
    status: str = "success"
    session_id: str | None = None
    conversation_id: str | None = None
    answer: str | None = None  # None in privacy mode
    answer_hash: str | None = None
    answer_chars: int = 0
    cited_chunk_ids: list[str] = field(default_factory=list)
    response_time_ms: float = 0.0

    def finish(self, status_code: int, error: str | None, elapsed_ms: float) -> None:
        """Set the outcome of the request (status code, seed status, error, time)."""
        self.status_code = status_code
        if error:
            self.error = error[:500]
        self.status = status_label(status_code, self.error)
        self.response_time_ms = round(elapsed_ms, 3)

    def record_answer(
        self, answer: Answer, *, tokens: int | None = None, salt: str = "", privacy: bool = False
    ) -> None:
        """Copy what the log keeps of a finished answer into this row; ``tokens`` is the
        total the API reported (the extractive generator reports no usage of its own)."""
        self.answer = None if privacy else storable(answer.text)
        self.answer_hash = _sha256(salt, answer.text)
        self.answer_chars = len(answer.text)
        self.cited_chunk_ids = list(dict.fromkeys(c.chunk_id for c in answer.citations))
        self.retrieved_chunk_ids = [s.hit.chunk.id for s in answer.sources]
        self.confidence_level = answer.confidence.level
        self.confidence_score = float(answer.confidence.score)
        self.fallback = answer.fallback
        self.latencies_ms = {k: float(v) for k, v in answer.timings_ms.items()}
        self.citations = len(answer.citations)
        self.citations_removed = len(answer.dropped_citations)
        self.citations_unsupported = sum(1 for c in answer.citations if not c.supported)
        self.generator = answer.generator
        self.model = answer.model
        reported = int(answer.usage.get("total_tokens", 0))
        self.total_tokens = tokens if tokens is not None else reported
        if answer.error and self.error is None:
            self.error = answer.error


class QueryLog(Protocol):
    """Where rows go. ``write`` never raises; ``rows`` is scoped to one tenant.

    ``write`` returns False when the log failed: the row was not stored, or the
    log had been lost before it (a deleted file, started anew with this row), so
    the failure metric counts rows an operator no longer has.

    Answer feedback (:mod:`ragline.serve.feedback`) is kept beside the rows:
    ``has_query`` says whether the tenant's log holds a query id, ``add_feedback``
    stores one piece (a person asked for it, so a failure raises
    :class:`QueryLogError`), ``feedback`` reads the tenant's since a time."""

    def write(self, row: QueryLogRow) -> bool: ...

    def rows(self, tenant: str, limit: int = 100) -> list[QueryLogRow]: ...

    def has_query(self, tenant: str, query_id: str) -> bool: ...

    def add_feedback(self, row: FeedbackRow) -> None: ...

    def feedback(self, tenant: str, since: str = "") -> list[FeedbackRow]: ...

    def close(self) -> None: ...


# --- hashing and rows (pure) ------------------------------------------------------------


def _sha256(salt: str, value: str) -> str:
    # surrogatepass: a lone surrogate in a question hashes instead of raising
    return hashlib.sha256(f"{salt}\x00{value}".encode("utf-8", "surrogatepass")).hexdigest()


def status_label(status_code: int, error: str | None = None) -> str:
    """Seed 004's status of a request: success, rate_limited, timeout or error."""
    if 200 <= status_code < 400:
        return "success"
    if status_code == 429:
        return "rate_limited"
    text = (error or "").lower()
    if status_code in (408, 504) or "timed out" in text or "timeout" in text:
        return "timeout"
    return "error"


def hash_ip(ip: str, salt: str) -> str:
    """Salted SHA-256 of a client address; spellings of one IPv6 address hash alike."""
    try:
        canonical = ipaddress.ip_address(ip.strip()).compressed
    except ValueError:
        canonical = ip.strip()
    return _sha256(salt, canonical)


def hash_question(q: str, salt: str = "") -> str:
    """SHA-256 of a question, case and spacing ignored so repeats group together.

    :func:`new_row` passes the log's salt, so that short questions cannot be
    recovered by hashing guesses without it.
    """
    return _sha256(salt, " ".join(q.split()).casefold())


def utc_now() -> str:
    """The log's timestamp format: ISO 8601, UTC, microseconds (fixed width)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def new_row(
    *,
    tenant: str,
    endpoint: str,
    ip: str,
    question: str,
    salt: str,
    privacy: bool,
    query_id: str | None = None,
    session_id: str | None = None,
    conversation_id: str | None = None,
) -> QueryLogRow:
    """Start a row for a request: id, time, hashes, and the question unless ``privacy``
    (text that is not valid UTF-8, a lone surrogate, is stored with ``?`` for it)."""
    return QueryLogRow(
        query_id=query_id or uuid.uuid4().hex,
        created_at=utc_now(),
        tenant=tenant,
        endpoint=endpoint,
        ip_hash=hash_ip(ip, salt),
        question_hash=hash_question(question, salt),
        question=None if privacy else storable(question),
        session_id=session_id,
        conversation_id=conversation_id,
    )


def storable(text: str) -> str:
    """``text`` as valid UTF-8 (lone surrogates become ``?``) so a database takes it."""
    return text.encode("utf-8", "replace").decode("utf-8")


COLUMNS: tuple[str, ...] = (
    "query_id",
    "created_at",
    "tenant",
    "endpoint",
    "ip_hash",
    "question_hash",
    "question",
    "retrieved_chunk_ids",
    "confidence_level",
    "confidence_score",
    "fallback",
    "latencies_ms",
    "status_code",
    "error",
    "citations",
    "citations_removed",
    "citations_unsupported",
    "generator",
    "model",
    "total_tokens",
    "status",
    "session_id",
    "conversation_id",
    "answer",
    "answer_hash",
    "answer_chars",
    "cited_chunk_ids",
    "response_time_ms",
)


def to_record(row: QueryLogRow, *, privacy: bool = False) -> tuple[Any, ...]:
    """A row as SQL parameters in :data:`COLUMNS` order (lists and dicts as JSON).

    ``privacy`` drops the question text whatever the row holds: the store, not
    only the caller, enforces ``QUERY_LOG_PRIVACY``.
    """
    return (
        row.query_id,
        row.created_at,
        row.tenant,
        row.endpoint,
        row.ip_hash,
        row.question_hash,
        None if privacy else row.question,
        json.dumps(list(row.retrieved_chunk_ids)),
        row.confidence_level,
        row.confidence_score,
        bool(row.fallback),
        json.dumps({k: float(v) for k, v in row.latencies_ms.items()}),
        int(row.status_code),
        row.error,
        int(row.citations),
        int(row.citations_removed),
        int(row.citations_unsupported),
        row.generator,
        row.model,
        int(row.total_tokens),
        row.status,
        row.session_id,
        row.conversation_id,
        None if privacy else row.answer,
        row.answer_hash,
        int(row.answer_chars),
        json.dumps(list(row.cited_chunk_ids)),
        float(row.response_time_ms),
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def from_record(rec: Sequence[Any]) -> QueryLogRow:
    """The inverse of :func:`to_record` (JSON columns may come back parsed or as text)."""
    d = dict(zip(COLUMNS, rec, strict=True))
    created = d["created_at"]
    if isinstance(created, datetime):
        created = created.astimezone(UTC).isoformat(timespec="microseconds")
    score = d["confidence_score"]
    return QueryLogRow(
        query_id=str(d["query_id"]),
        created_at=str(created),
        tenant=str(d["tenant"]),
        endpoint=str(d["endpoint"]),
        ip_hash=str(d["ip_hash"]),
        question_hash=str(d["question_hash"]),
        question=d["question"],
        retrieved_chunk_ids=[str(c) for c in _json(d["retrieved_chunk_ids"])],
        confidence_level=d["confidence_level"],
        confidence_score=None if score is None else float(score),
        fallback=bool(d["fallback"]),
        latencies_ms={str(k): float(v) for k, v in _json(d["latencies_ms"]).items()},
        status_code=int(d["status_code"]),
        error=d["error"],
        citations=int(d["citations"]),
        citations_removed=int(d["citations_removed"]),
        citations_unsupported=int(d["citations_unsupported"]),
        generator=str(d["generator"]),
        model=str(d["model"]),
        total_tokens=int(d["total_tokens"]),
        status=str(d["status"]),
        session_id=d["session_id"],
        conversation_id=d["conversation_id"],
        answer=d["answer"],
        answer_hash=d["answer_hash"],
        answer_chars=int(d["answer_chars"]),
        cited_chunk_ids=[str(c) for c in _json(d["cited_chunk_ids"])],
        response_time_ms=float(d["response_time_ms"]),
    )


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= 100_000:
        raise ValueError(f"limit must be between 1 and 100000, not {limit}")


def _cutoff(retention_days: int) -> str:
    return (datetime.now(UTC) - timedelta(days=retention_days)).isoformat(timespec="microseconds")


# --- salt ---------------------------------------------------------------------------------


def load_salt(settings: Settings) -> str:
    """``QUERY_LOG_SALT``, or the random salt kept next to the index (made on first use).

    The file is created once, mode 0600, atomically (written aside, then linked
    into place), so worker processes starting together all end up with one salt.
    """
    if settings.query_log_salt:
        return settings.query_log_salt
    return persisted_salt(Path(settings.index_dir) / SALT_FILE)


def persisted_salt(path: Path) -> str:
    """Read the salt at ``path``, creating it (64 hex characters, mode 0600) if missing."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):  # another worker was first: use its salt
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        log.warning("query log salt %s is readable by others (mode %o); use 0600", path, mode)
    salt = path.read_text().strip()
    if len(salt) < 16:
        raise QueryLogError(f"{path}: salt file is empty or too short; delete it to make a new one")
    return salt


# --- SQLite -------------------------------------------------------------------------------

#: Statements that bring the schema from version ``v - 1`` to ``v``.
SQLITE_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE query_log (
            query_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            tenant TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            ip_hash TEXT NOT NULL,
            question_hash TEXT NOT NULL,
            question TEXT,
            retrieved_chunk_ids TEXT NOT NULL,
            confidence_level TEXT,
            confidence_score REAL,
            fallback INTEGER NOT NULL,
            latencies_ms TEXT NOT NULL,
            status_code INTEGER NOT NULL,
            error TEXT,
            citations INTEGER NOT NULL,
            citations_removed INTEGER NOT NULL,
            citations_unsupported INTEGER NOT NULL,
            generator TEXT NOT NULL,
            model TEXT NOT NULL,
            total_tokens INTEGER NOT NULL
        )""",
        "CREATE INDEX query_log_tenant_time ON query_log (tenant, created_at)",
        "CREATE INDEX query_log_time ON query_log (created_at)",
    ),
    2: (
        "ALTER TABLE query_log ADD COLUMN status TEXT NOT NULL DEFAULT 'success'",
        "ALTER TABLE query_log ADD COLUMN session_id TEXT",
        "ALTER TABLE query_log ADD COLUMN conversation_id TEXT",
        "ALTER TABLE query_log ADD COLUMN answer TEXT",
        "ALTER TABLE query_log ADD COLUMN answer_hash TEXT",
        "ALTER TABLE query_log ADD COLUMN answer_chars INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE query_log ADD COLUMN cited_chunk_ids TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE query_log ADD COLUMN response_time_ms REAL NOT NULL DEFAULT 0",
    ),
    3: SQLITE_FEEDBACK_DDL,
}

_INSERT = f"INSERT INTO query_log ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
_INSERT_FEEDBACK = (
    f"INSERT INTO query_feedback ({', '.join(FEEDBACK_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in FEEDBACK_COLUMNS)})"
)


def migrate_sqlite(conn: sqlite3.Connection) -> None:
    """Create or upgrade the table to :data:`SCHEMA_VERSION` (one writer at a time)."""
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise QueryLogError(
                f"query log schema version {version} is newer than this ragline "
                f"({SCHEMA_VERSION}); upgrade ragline or point QUERY_LOG_URL elsewhere"
            )
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for stmt in SQLITE_MIGRATIONS[v]:
                conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


class _Guarded:
    """The lock and drop-on-failure discipline both database logs share: one thread at
    a time, and any failure closes the connection so the next call starts afresh."""

    _lock: threading.Lock

    def _drop(self) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _guarded(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except BaseException:
                self._drop()
                raise

    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        with self._lock:
            self._drop()


class SqliteQueryLog(_Guarded):
    """The default query log: one SQLite file, shared by worker processes (WAL).

    The connection is checked against the file on every write: if the file was
    deleted or replaced, the old connection is dropped and a new database is
    started at the same path (a warning says so). Any failure closes the
    connection, so the next write tries again from scratch.
    """

    def __init__(
        self,
        path: Path,
        *,
        timeout_s: float = 1.0,
        retention_days: int = 0,
        privacy: bool = False,
    ) -> None:
        self.path = Path(path)
        self.privacy = privacy
        self.timeout_s = timeout_s
        self.retention_days = retention_days
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._ident: tuple[int, int] | None = None
        self._last_prune = float("-inf")
        try:
            with self._lock:
                self._connection()
        except Exception as e:  # not fatal: the server answers without a log
            log.warning("query log %s cannot be opened; requests go unlogged: %s", self.path, e)

    def write(self, row: QueryLogRow) -> bool:
        try:
            record = to_record(row, privacy=self.privacy)
            with self._guarded():
                lost = self._conn is not None and self._file_identity() != self._ident
                conn = self._connection()
                conn.execute(_INSERT, record)
                self._maybe_prune(conn)
            return not lost
        except Exception as e:  # a log write must never fail the request
            log.warning("query log write to %s failed (request not affected): %s", self.path, e)
            return False

    def rows(self, tenant: str, limit: int = 100) -> list[QueryLogRow]:
        """The tenant's newest rows first. Raises :class:`QueryLogError` if unreadable."""
        _check_limit(limit)
        sql = (
            f"SELECT {', '.join(COLUMNS)} FROM query_log WHERE tenant = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?"
        )
        try:
            with self._guarded():
                records = self._connection().execute(sql, (tenant, limit)).fetchall()
        except (sqlite3.Error, OSError) as e:
            raise QueryLogError(f"query log {self.path} cannot be read: {e}") from e
        return [from_record(r) for r in records]

    def has_query(self, tenant: str, query_id: str) -> bool:
        sql = "SELECT 1 FROM query_log WHERE tenant = ? AND query_id = ?"
        try:
            with self._guarded():
                found = self._connection().execute(sql, (tenant, query_id)).fetchone()
        except (sqlite3.Error, OSError) as e:
            raise QueryLogError(f"query log {self.path} cannot be read: {e}") from e
        return found is not None

    def add_feedback(self, row: FeedbackRow) -> None:
        try:
            with self._guarded():
                self._connection().execute(_INSERT_FEEDBACK, row.record(privacy=self.privacy))
        except (sqlite3.Error, OSError) as e:
            raise QueryLogError(f"query log {self.path} cannot store feedback: {e}") from e

    def feedback(self, tenant: str, since: str = "") -> list[FeedbackRow]:
        sql = (
            f"SELECT {', '.join(FEEDBACK_COLUMNS)} FROM query_feedback "
            "WHERE tenant = ? AND created_at >= ? ORDER BY created_at, id"
        )
        try:
            with self._guarded():
                records = self._connection().execute(sql, (tenant, since)).fetchall()
        except (sqlite3.Error, OSError) as e:
            raise QueryLogError(f"query log {self.path} cannot be read: {e}") from e
        return [from_feedback_record(r) for r in records]

    # -- connection handling (call with the lock held) --

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._file_identity() != self._ident:
            log.warning("query log %s was deleted or replaced; starting a new one", self.path)
            self._drop()
        if self._conn is None:
            self._conn = self._open()
            self._ident = self._file_identity()
        return self._conn

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _open(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise QueryLogError(f"{self.path} is a directory, not a SQLite file")
        if not self.path.exists():
            # A -wal/-shm left behind by a deleted database would be replayed into
            # the new one: they belong to no file now, so they go.
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            if conn.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
                raise QueryLogError(f"{self.path}: cannot switch the database to WAL mode")
            conn.execute("PRAGMA synchronous=NORMAL")
            migrate_sqlite(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None
        self._ident = None

    def _maybe_prune(self, conn: sqlite3.Connection) -> None:
        now = time.monotonic()
        if self.retention_days <= 0 or now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        cutoff = _cutoff(self.retention_days)
        conn.execute("DELETE FROM query_log WHERE created_at < ?", (cutoff,))
        conn.execute("DELETE FROM query_feedback WHERE created_at < ?", (cutoff,))


class NullQueryLog:
    """``QUERY_LOG_ENABLED=false``: rows are accepted and forgotten."""

    def write(self, row: QueryLogRow) -> bool:
        return True

    def rows(self, tenant: str, limit: int = 100) -> list[QueryLogRow]:
        _check_limit(limit)
        return []

    def has_query(self, tenant: str, query_id: str) -> bool:
        return False  # nothing is logged, so no answer can be rated

    def add_feedback(self, row: FeedbackRow) -> None:
        return None

    def feedback(self, tenant: str, since: str = "") -> list[FeedbackRow]:
        return []

    def close(self) -> None:
        return None


# --- PostgreSQL -----------------------------------------------------------------------------

_PG_TABLE = "ragline_query_log"
_PG_FEEDBACK = "ragline_query_feedback"
_PG_MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        f"""CREATE TABLE {_PG_TABLE} (
            query_id TEXT PRIMARY KEY,
            created_at TIMESTAMPTZ NOT NULL,
            tenant TEXT NOT NULL,
            endpoint TEXT NOT NULL,
            ip_hash TEXT NOT NULL,
            question_hash TEXT NOT NULL,
            question TEXT,
            retrieved_chunk_ids JSONB NOT NULL,
            confidence_level TEXT,
            confidence_score DOUBLE PRECISION,
            fallback BOOLEAN NOT NULL,
            latencies_ms JSONB NOT NULL,
            status_code INTEGER NOT NULL,
            error TEXT,
            citations INTEGER NOT NULL,
            citations_removed INTEGER NOT NULL,
            citations_unsupported INTEGER NOT NULL,
            generator TEXT NOT NULL,
            model TEXT NOT NULL,
            total_tokens INTEGER NOT NULL
        )""",
        f"CREATE INDEX {_PG_TABLE}_tenant_time ON {_PG_TABLE} (tenant, created_at)",
    ),
    2: (
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN status TEXT NOT NULL DEFAULT 'success'",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN session_id TEXT",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN conversation_id TEXT",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN answer TEXT",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN answer_hash TEXT",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN answer_chars INTEGER NOT NULL DEFAULT 0",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN cited_chunk_ids JSONB NOT NULL DEFAULT '[]'",
        f"ALTER TABLE {_PG_TABLE} ADD COLUMN response_time_ms DOUBLE PRECISION NOT NULL DEFAULT 0",
    ),
    3: postgres_feedback_ddl(_PG_FEEDBACK),
}


class PostgresQueryLog(_Guarded):
    """The query log in PostgreSQL (``QUERY_LOG_URL=postgresql://…``), same columns.

    The schema version lives in ``ragline_query_log_meta``; migrations run under
    an advisory lock so workers starting together do not race. Like the SQLite
    log, ``write`` never raises and reconnects after a failure.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 1.0,
        retention_days: int = 0,
        privacy: bool = False,
    ) -> None:
        try:
            import psycopg
        except ImportError as e:
            raise QueryLogError(
                "QUERY_LOG_URL is a PostgreSQL URL but psycopg is not installed "
                "(pip install -e '.[postgres]')"
            ) from e
        self._psycopg: Any = psycopg
        self.url = url
        self.privacy = privacy
        self.timeout_s = timeout_s
        self.retention_days = retention_days
        self._lock = threading.Lock()
        self._conn: Any = None
        self._last_prune = float("-inf")
        try:
            with self._lock:
                self._connection()
        except Exception as e:
            log.warning("query log database cannot be reached; requests go unlogged: %s", e)

    def write(self, row: QueryLogRow) -> bool:
        try:
            rec = list(to_record(row, privacy=self.privacy))
            created = datetime.fromisoformat(row.created_at)
            rec[1] = created if created.tzinfo else created.replace(tzinfo=UTC)
            sql = (
                f"INSERT INTO {_PG_TABLE} ({', '.join(COLUMNS)}) "
                f"VALUES ({', '.join('%s' for _ in COLUMNS)})"
            )
            with self._guarded():
                conn = self._connection()
                conn.execute(sql, rec)
                self._maybe_prune(conn)
            return True
        except Exception as e:
            log.warning("query log write to PostgreSQL failed (request not affected): %s", e)
            return False

    def rows(self, tenant: str, limit: int = 100) -> list[QueryLogRow]:
        _check_limit(limit)
        sql = (
            f"SELECT {', '.join(COLUMNS)} FROM {_PG_TABLE} WHERE tenant = %s "
            "ORDER BY created_at DESC, query_id DESC LIMIT %s"
        )
        try:
            with self._guarded():
                records = self._connection().execute(sql, (tenant, limit)).fetchall()
        except self._psycopg.Error as e:
            raise QueryLogError(f"query log in PostgreSQL cannot be read: {e}") from e
        return [from_record(r) for r in records]

    def has_query(self, tenant: str, query_id: str) -> bool:
        sql = f"SELECT 1 FROM {_PG_TABLE} WHERE tenant = %s AND query_id = %s"
        try:
            with self._guarded():
                found = self._connection().execute(sql, (tenant, query_id)).fetchone()
        except self._psycopg.Error as e:
            raise QueryLogError(f"query log in PostgreSQL cannot be read: {e}") from e
        return found is not None

    def add_feedback(self, row: FeedbackRow) -> None:
        rec = list(row.record(privacy=self.privacy))
        rec[2] = datetime.fromisoformat(row.created_at)
        sql = (
            f"INSERT INTO {_PG_FEEDBACK} ({', '.join(FEEDBACK_COLUMNS)}) "
            f"VALUES ({', '.join('%s' for _ in FEEDBACK_COLUMNS)})"
        )
        try:
            with self._guarded():
                self._connection().execute(sql, rec)
        except self._psycopg.Error as e:
            raise QueryLogError(f"query log in PostgreSQL cannot store feedback: {e}") from e

    def feedback(self, tenant: str, since: str = "") -> list[FeedbackRow]:
        start = datetime.fromisoformat(since) if since else datetime.min.replace(tzinfo=UTC)
        sql = (
            f"SELECT {', '.join(FEEDBACK_COLUMNS)} FROM {_PG_FEEDBACK} "
            "WHERE tenant = %s AND created_at >= %s ORDER BY created_at, id"
        )
        try:
            with self._guarded():
                records = self._connection().execute(sql, (tenant, start)).fetchall()
        except self._psycopg.Error as e:
            raise QueryLogError(f"query log in PostgreSQL cannot be read: {e}") from e
        return [from_feedback_record(r) for r in records]

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            conn = self._psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.timeout_s))
            )
            try:
                conn.execute(f"SET statement_timeout = {int(self.timeout_s * 1000)}")
                self._migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _migrate(self, conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_PG_TABLE,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_PG_TABLE}_meta "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            got = conn.execute(
                f"SELECT value FROM {_PG_TABLE}_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = int(got[0]) if got else 0
            if version > SCHEMA_VERSION:
                raise QueryLogError(
                    f"query log schema version {version} is newer than this ragline "
                    f"({SCHEMA_VERSION})"
                )
            for v in range(version + 1, SCHEMA_VERSION + 1):
                for stmt in _PG_MIGRATIONS[v]:
                    conn.execute(stmt)
            conn.execute(
                f"INSERT INTO {_PG_TABLE}_meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(SCHEMA_VERSION),),
            )

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def _maybe_prune(self, conn: Any) -> None:
        now = time.monotonic()
        if self.retention_days <= 0 or now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        for table in (_PG_TABLE, _PG_FEEDBACK):
            conn.execute(
                f"DELETE FROM {table} WHERE created_at < now() - make_interval(days => %s)",
                (self.retention_days,),
            )


# --- choosing a store -------------------------------------------------------------------------


def _open_postgres(url: str, settings: Settings) -> QueryLog:
    return PostgresQueryLog(
        url,
        timeout_s=settings.query_log_timeout_s,
        retention_days=settings.query_log_retention_days,
        privacy=settings.query_log_privacy,
    )


#: URL scheme → factory. Register another store here to make QUERY_LOG_URL accept it.
QUERY_LOG_BACKENDS: dict[str, Callable[[str, Settings], QueryLog]] = {
    "postgres": _open_postgres,
    "postgresql": _open_postgres,
}


def sqlite_path(settings: Settings) -> Path | None:
    """The SQLite file the settings log to, or None when the log is not SQLite."""
    url = settings.query_log_url.strip()
    if not url:
        return Path(settings.index_dir) / SQLITE_FILE
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if "://" in url:
        return None
    return Path(url)


def make_query_log(settings: Settings) -> QueryLog:
    """The query log the settings ask for.

    ``QUERY_LOG_URL`` empty: ``<index_dir>/querylog.sqlite3``; a path or a
    ``sqlite:///`` URL (``sqlite:////abs/path`` for an absolute one): that file;
    ``postgresql://…``: :class:`PostgresQueryLog`. Another scheme is a
    :class:`QueryLogError` naming the setting, raised at startup.
    """
    if not settings.query_log_enabled:
        return NullQueryLog()
    path = sqlite_path(settings)
    if path is not None:
        # The folder is made at startup only: one removed while running stays a failure.
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            log.warning("query log folder %s cannot be created: %s", path.parent, e)
        return SqliteQueryLog(
            path,
            timeout_s=settings.query_log_timeout_s,
            retention_days=settings.query_log_retention_days,
            privacy=settings.query_log_privacy,
        )
    url = settings.query_log_url.strip()
    scheme = url.split("://", 1)[0].lower()
    factory = QUERY_LOG_BACKENDS.get(scheme)
    if factory is None:
        known = ", ".join(sorted({"sqlite", *QUERY_LOG_BACKENDS}))
        raise QueryLogError(f"QUERY_LOG_URL scheme {scheme!r} is not supported (use {known})")
    return factory(url, settings)
