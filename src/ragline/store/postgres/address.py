"""``postgres://…`` / ``postgresql://…``: PostgreSQL + pgvector (``?schema=NAME`` puts
ragline's tables in that schema; every other parameter goes to libpq)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ragline.store.address import StoreBackend, StoreLocation, StoreUrlError, safe_url

if TYPE_CHECKING:
    from ragline.settings import Settings
    from ragline.store.base import IndexStore

#: Query parameters ragline reads itself (libpq would reject them).
_OWN_PARAMS = frozenset({"schema"})


def parse(scheme: str, text: str) -> StoreLocation:
    parts = urlsplit(text)
    own: dict[str, str] = {}
    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _OWN_PARAMS:
            own[key] = value
        else:
            kept.append((key, value))
    if "schema" in own and not own["schema"]:
        raise StoreUrlError(f"STORE_URL {safe_url(text)}: empty ?schema=")
    target = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return StoreLocation("postgres", target, own)


def open_store(location: StoreLocation, settings: Settings, dimension: int) -> IndexStore:
    from ragline.store.postgres.store import PostgresStore

    return PostgresStore(
        location.target,
        dimension=dimension,
        read_url=settings.database_read_url or None,
        schema=location.options.get("schema") or None,
        pool_size=settings.pg_pool_size,
        statement_timeout_s=settings.pg_statement_timeout_s,
        write_timeout_s=settings.pg_write_timeout_s,
        connect_timeout_s=settings.pg_connect_timeout_s,
        max_retries=settings.pg_max_retries,
        retry_base_s=settings.pg_retry_base_s,
        hnsw_m=settings.hnsw_m,
        hnsw_ef_construction=settings.hnsw_ef_construction,
        ef_search=settings.ann_ef,
        ann_min_rows=settings.ann_min_rows,
        maintenance_work_mem_mb=settings.pg_maintenance_work_mem_mb,
        bm25_scorer=settings.pg_bm25_scorer,
        bm25_repack_fraction=settings.pg_bm25_repack_fraction,
        bm25_numpy_probe_postings=settings.pg_bm25_probe_postings,
        bm25_numpy_prune_min_postings=settings.pg_bm25_prune_min_postings,
    )


POSTGRES = StoreBackend("postgres", ("postgres", "postgresql"), parse, open_store)
