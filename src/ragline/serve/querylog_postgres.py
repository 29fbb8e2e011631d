"""The query log in PostgreSQL (``QUERY_LOG_URL=postgresql://…``), same columns as SQLite."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from ragline.serve.feedback import (
    FEEDBACK_COLUMNS,
    FeedbackRow,
    postgres_feedback_ddl,
)
from ragline.serve.querylog_rows import (
    COLUMNS,
    SCHEMA_VERSION,
    Guarded,
    QueryLogError,
    QueryLogRow,
    migration_steps,
    to_record,
)

#: The query log's one logger, whichever of its modules speaks.
log = logging.getLogger("ragline.serve.querylog")

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


class PostgresQueryLog(Guarded):
    """The query log in PostgreSQL (``QUERY_LOG_URL=postgresql://…``), same columns.

    The schema version lives in ``ragline_query_log_meta``; migrations run under
    an advisory lock so workers starting together do not race. Like the SQLite
    log, ``write`` never raises and reconnects after a failure.
    """

    _table, _feedback_table = _PG_TABLE, _PG_FEEDBACK
    _mark, _tiebreak = "%s", "query_id"

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
        super().__init__(timeout_s=timeout_s, retention_days=retention_days, privacy=privacy)
        self._psycopg: Any = psycopg
        self.url = url
        self._conn: Any = None
        self._label = "in PostgreSQL"
        self._errors = (psycopg.Error,)
        self._connect_or_warn("database cannot be reached")

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

    def add_feedback(self, row: FeedbackRow) -> None:
        rec = list(row.record(privacy=self.privacy))
        rec[2] = datetime.fromisoformat(row.created_at)
        sql = (
            f"INSERT INTO {_PG_FEEDBACK} ({', '.join(FEEDBACK_COLUMNS)}) "
            f"VALUES ({', '.join('%s' for _ in FEEDBACK_COLUMNS)})"
        )
        self._query(sql, rec, fetch="none", doing="store feedback")

    def _since(self, since: str) -> datetime:
        return datetime.fromisoformat(since) if since else datetime.min.replace(tzinfo=UTC)

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
            for stmt in migration_steps(version, _PG_MIGRATIONS):
                conn.execute(stmt)
            conn.execute(
                f"INSERT INTO {_PG_TABLE}_meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(SCHEMA_VERSION),),
            )

    def _maybe_prune(self, conn: Any) -> None:
        if not self._prune_due():
            return
        for table in (_PG_TABLE, _PG_FEEDBACK):
            conn.execute(
                f"DELETE FROM {table} WHERE created_at < now() - make_interval(days => %s)",
                (self.retention_days,),
            )
