"""Query log rows: the row, the store protocol, hashing, records and the salt (pure).

The stores (:mod:`ragline.serve.querylog_sqlite`, :mod:`ragline.serve.querylog_postgres`)
and the factory (:mod:`ragline.serve.querylog`) build on these; nothing here opens a database.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

from ragline.errors import FaultError
from ragline.serve.feedback import (
    FEEDBACK_COLUMNS,
    FeedbackRow,
    from_feedback_record,
)
from ragline.settings import Settings
from ragline.types import Answer

#: The query log's one logger, whichever of its modules speaks.
log = logging.getLogger("ragline.serve.querylog")

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


def check_limit(limit: int) -> None:
    if not 1 <= limit <= 100_000:
        raise ValueError(f"limit must be between 1 and 100000, not {limit}")


def migration_steps(
    version: int, migrations: Mapping[int, Sequence[str]], hint: str = ""
) -> list[str]:
    """The statements that bring a log's schema from ``version`` to
    :data:`SCHEMA_VERSION`, in order. Both stores refuse a schema newer than this
    ragline the same way: a :class:`QueryLogError` (``hint`` says what to do)."""
    if version > SCHEMA_VERSION:
        raise QueryLogError(
            f"query log schema version {version} is newer than this ragline "
            f"({SCHEMA_VERSION}){hint}"
        )
    return [stmt for v in range(version + 1, SCHEMA_VERSION + 1) for stmt in migrations[v]]


def retention_cutoff(retention_days: int) -> str:
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


# --- shared by the database logs -----------------------------------------------------------


class Guarded:
    """The lock and drop-on-failure discipline both database logs share: one thread at
    a time, and any failure closes the connection so the next call starts afresh.

    The common state, the first connection, the reads (:meth:`rows`, :meth:`has_query`,
    :meth:`feedback`) and the prune throttle live here too: the stores differ only in
    table names, the parameter marker and the tie-break column, so each sets those
    and one SQL text serves both."""

    #: The open connection, or None until the next call opens one.
    _conn: Any
    #: How error messages name the log ("/path/querylog.sqlite3", "in PostgreSQL").
    _label: str
    #: The driver's errors that a read or a feedback write turns into QueryLogError.
    _errors: tuple[type[BaseException], ...]
    #: The two tables and the driver's parameter marker ("?" or "%s").
    _table: str
    _feedback_table: str
    _mark: str
    #: The column that orders rows written in the same microsecond, newest first.
    _tiebreak: str

    def __init__(self, *, timeout_s: float, retention_days: int, privacy: bool) -> None:
        self.privacy = privacy
        self.timeout_s = timeout_s
        self.retention_days = retention_days
        self._lock = threading.Lock()
        self._last_prune = float("-inf")

    def _connect_or_warn(self, failure: str) -> None:
        """Connect once at startup. A failure is only a warning (``failure`` says what went
        wrong): the server answers without a log, and the next write tries again."""
        try:
            with self._lock:
                self._connection()
        except Exception as e:
            log.warning("query log %s; requests go unlogged: %s", failure, e)

    def _drop(self) -> None:
        """Close the connection, ignoring a close that fails (the link may be gone already)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def _connection(self) -> Any:
        raise NotImplementedError

    def _since(self, since: str) -> Any:
        """The ``since`` parameter as the driver compares it to ``created_at``."""
        return since

    def rows(self, tenant: str, limit: int = 100) -> list[QueryLogRow]:
        """The tenant's newest rows first. Raises :class:`QueryLogError` if unreadable."""
        check_limit(limit)
        sql = (
            f"SELECT {', '.join(COLUMNS)} FROM {self._table} WHERE tenant = {self._mark} "
            f"ORDER BY created_at DESC, {self._tiebreak} DESC LIMIT {self._mark}"
        )
        return [from_record(r) for r in self._query(sql, (tenant, limit))]

    def has_query(self, tenant: str, query_id: str) -> bool:
        sql = f"SELECT 1 FROM {self._table} WHERE tenant = {self._mark} AND query_id = {self._mark}"
        return self._query(sql, (tenant, query_id), fetch="one") is not None

    def feedback(self, tenant: str, since: str = "") -> list[FeedbackRow]:
        sql = (
            f"SELECT {', '.join(FEEDBACK_COLUMNS)} FROM {self._feedback_table} "
            f"WHERE tenant = {self._mark} AND created_at >= {self._mark} ORDER BY created_at, id"
        )
        return [from_feedback_record(r) for r in self._query(sql, (tenant, self._since(since)))]

    def _prune_due(self) -> bool:
        """Whether retention is on and the last prune is :data:`PRUNE_EVERY_S` old (then
        the clock restarts): pruning on every write would cost a DELETE per request."""
        now = time.monotonic()
        if self.retention_days <= 0 or now - self._last_prune < PRUNE_EVERY_S:
            return False
        self._last_prune = now
        return True

    def _query(
        self,
        sql: str,
        params: Sequence[Any],
        *,
        fetch: Literal["all", "one", "none"] = "all",
        doing: str = "be read",
    ) -> Any:
        """Run one statement under the lock; a driver error is a :class:`QueryLogError`."""
        try:
            with self._guarded():
                cursor = self._connection().execute(sql, params)
                if fetch == "all":
                    return cursor.fetchall()
                return cursor.fetchone() if fetch == "one" else None
        except self._errors as e:
            raise QueryLogError(f"query log {self._label} cannot {doing}: {e}") from e

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


class NullQueryLog:
    """``QUERY_LOG_ENABLED=false``: rows are accepted and forgotten."""

    def write(self, row: QueryLogRow) -> bool:
        return True

    def rows(self, tenant: str, limit: int = 100) -> list[QueryLogRow]:
        check_limit(limit)
        return []

    def has_query(self, tenant: str, query_id: str) -> bool:
        return False  # nothing is logged, so no answer can be rated

    def add_feedback(self, row: FeedbackRow) -> None:
        return None

    def feedback(self, tenant: str, since: str = "") -> list[FeedbackRow]:
        return []

    def close(self) -> None:
        return None
