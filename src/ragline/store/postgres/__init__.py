"""The PostgreSQL + pgvector store, by concern: :mod:`.store` (the Store
methods), :mod:`.pool` (connections, retries), :mod:`.schema` (migrations),
:mod:`.writes` (COPY of chunks and postings, statistics), and exact BM25
top-k: :mod:`.bm25_packed` (numpy over packed postings, the default),
:mod:`.bm25_formula` (its arithmetic), :mod:`.bm25_sql` (in SQL) and
:mod:`.bm25_query` (what both scorers share)."""

from typing import TYPE_CHECKING

from ragline.lazy import lazy_getattr

if TYPE_CHECKING:
    from ragline.store.postgres.pool import redact_url
    from ragline.store.postgres.schema import (
        MIGRATIONS_TABLE,
        Migration,
        apply_migrations,
        check_schema,
        load_migrations,
    )
    from ragline.store.postgres.store import PostgresStore

# Imported on first use: psycopg is heavy, and ``store.url`` reads ``.address``.
_LOCATIONS = {
    "redact_url": "ragline.store.postgres.pool",
    "MIGRATIONS_TABLE": "ragline.store.postgres.schema",
    "Migration": "ragline.store.postgres.schema",
    "apply_migrations": "ragline.store.postgres.schema",
    "check_schema": "ragline.store.postgres.schema",
    "load_migrations": "ragline.store.postgres.schema",
    "PostgresStore": "ragline.store.postgres.store",
}
__getattr__ = lazy_getattr(__name__, _LOCATIONS, globals())

__all__ = [
    "MIGRATIONS_TABLE",
    "Migration",
    "PostgresStore",
    "apply_migrations",
    "check_schema",
    "load_migrations",
    "redact_url",
]
