"""The schema of a PostgreSQL index: versioned migrations (``ragline/store/
migrations/NNNN_*.sql``) applied at open under an advisory lock, so two
processes starting together never race; ``ragline_schema_migrations`` records
what ran. A database migrated by a newer ragline is refused, not guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from ragline.store.base import StoreError

#: Advisory lock key of schema migrations (any constant both processes agree on).
MIGRATION_LOCK = 0x7261_676C_696E_6501
MIGRATIONS_TABLE = "ragline_schema_migrations"
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


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


def hnsw_name(dimension: int) -> str:
    return f"ragline_chunks_hnsw_{int(dimension)}"
