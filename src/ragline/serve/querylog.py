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

This module picks the store; the row, hashing and salt live in
:mod:`~ragline.serve.querylog_rows`, the stores in :mod:`~ragline.serve.querylog_sqlite`
and :mod:`~ragline.serve.querylog_postgres`. Every public name is importable from here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from ragline.serve.querylog_postgres import PostgresQueryLog
from ragline.serve.querylog_rows import (
    COLUMNS,
    PRUNE_EVERY_S,
    SALT_FILE,
    SCHEMA_VERSION,
    SQLITE_FILE,
    NullQueryLog,
    QueryLog,
    QueryLogError,
    QueryLogRow,
    from_record,
    hash_ip,
    hash_question,
    load_salt,
    new_row,
    persisted_salt,
    status_label,
    storable,
    to_record,
    utc_now,
)
from ragline.serve.querylog_sqlite import (
    SQLITE_MIGRATIONS,
    SqliteQueryLog,
    migrate_sqlite,
)
from ragline.settings import ServeSettings, Settings

__all__ = [
    "COLUMNS",
    "PRUNE_EVERY_S",
    "QUERY_LOG_BACKENDS",
    "SALT_FILE",
    "SCHEMA_VERSION",
    "SQLITE_FILE",
    "SQLITE_MIGRATIONS",
    "NullQueryLog",
    "PostgresQueryLog",
    "QueryLog",
    "QueryLogError",
    "QueryLogRow",
    "SqliteQueryLog",
    "from_record",
    "hash_ip",
    "hash_question",
    "load_salt",
    "make_query_log",
    "migrate_sqlite",
    "new_row",
    "persisted_salt",
    "sqlite_path",
    "status_label",
    "storable",
    "to_record",
    "utc_now",
]

log = logging.getLogger(__name__)

# --- choosing a store -------------------------------------------------------------------------


def _open_postgres(url: str, settings: ServeSettings) -> QueryLog:
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
