"""The PostgreSQL + pgvector store, by concern: :mod:`.store` (the Store
methods), :mod:`.pool` (connections, retries), :mod:`.schema` (migrations),
:mod:`.writes` (COPY of chunks and postings, statistics) and :mod:`.bm25`
(exact BM25 top-k)."""

from ragline.store.postgres.pool import redact_url
from ragline.store.postgres.schema import (
    MIGRATIONS_TABLE,
    Migration,
    apply_migrations,
    check_schema,
    load_migrations,
)
from ragline.store.postgres.store import PostgresStore

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "PostgresStore",
    "apply_migrations",
    "check_schema",
    "load_migrations",
    "redact_url",
]
