"""The default query log: one SQLite file next to the index, WAL mode, versioned schema."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

from ragline.serve.feedback import (
    FEEDBACK_COLUMNS,
    SQLITE_FEEDBACK_DDL,
    FeedbackRow,
)
from ragline.serve.querylog_rows import (
    COLUMNS,
    SCHEMA_VERSION,
    Guarded,
    QueryLogError,
    QueryLogRow,
    migration_steps,
    retention_cutoff,
    to_record,
)

#: The query log's one logger, whichever of its modules speaks.
log = logging.getLogger("ragline.serve.querylog")

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
        hint = "; upgrade ragline or point QUERY_LOG_URL elsewhere"
        for stmt in migration_steps(version, SQLITE_MIGRATIONS, hint):
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


class SqliteQueryLog(Guarded):
    """The default query log: one SQLite file, shared by worker processes (WAL).

    The connection is checked against the file on every write: if the file was
    deleted or replaced, the old connection is dropped and a new database is
    started at the same path (a warning says so). Any failure closes the
    connection, so the next write tries again from scratch.
    """

    _table, _feedback_table = "query_log", "query_feedback"
    _mark, _tiebreak = "?", "rowid"

    def __init__(
        self,
        path: Path,
        *,
        timeout_s: float = 1.0,
        retention_days: int = 0,
        privacy: bool = False,
    ) -> None:
        super().__init__(timeout_s=timeout_s, retention_days=retention_days, privacy=privacy)
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._ident: tuple[int, int] | None = None
        self._label = str(self.path)
        self._errors = (sqlite3.Error, OSError)
        self._connect_or_warn(f"{self.path} cannot be opened")

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

    def add_feedback(self, row: FeedbackRow) -> None:
        record = row.record(privacy=self.privacy)
        self._query(_INSERT_FEEDBACK, record, fetch="none", doing="store feedback")

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
        super()._drop()
        self._ident = None

    def _maybe_prune(self, conn: sqlite3.Connection) -> None:
        if not self._prune_due():
            return
        cutoff = retention_cutoff(self.retention_days)
        conn.execute("DELETE FROM query_log WHERE created_at < ?", (cutoff,))
        conn.execute("DELETE FROM query_feedback WHERE created_at < ?", (cutoff,))
