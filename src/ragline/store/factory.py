"""Choose the store from settings, in one place: ``STORE_URL`` (see :mod:`ragline.store.url`)."""

from __future__ import annotations

from pathlib import Path

from ragline.settings import Settings
from ragline.store.base import IndexStore, StoreError
from ragline.store.url import StoreLocation, StoreUrlError, parse_store_url


def store_location(settings: Settings, url: str | None = None) -> StoreLocation:
    """Where the configured index lives (``url`` overrides ``settings.store_url``)."""
    try:
        return parse_store_url(
            settings.store_url if url is None else url,
            Path(settings.index_dir),
            settings.database_url,
        )
    except StoreUrlError as exc:
        raise StoreError(str(exc)) from exc


def open_store(location: StoreLocation, settings: Settings, dimension: int) -> IndexStore:
    """Open (creating if needed) the store at ``location`` with the settings' tuning."""
    if location.kind == "postgres":
        from ragline.store.postgres import PostgresStore

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
    if location.kind == "qdrant":
        from ragline.store.qdrant import QdrantStore

        return QdrantStore(
            location.target,
            dimension=dimension,
            collection=location.options.get("collection") or "ragline",
            api_key=location.options.get("api_key") or None,
        )
    if location.kind == "chroma":
        from ragline.store.chroma import ChromaStore

        collection = location.options.get("collection") or "ragline"
        terms = None
        if location.target.startswith(("http://", "https://")):
            host = location.target.split("://", 1)[1].replace(":", "_")
            terms = Path(settings.index_dir) / "chroma" / f"{host}_{collection}.sqlite"
        return ChromaStore(
            location.target,
            dimension=dimension,
            collection=collection,
            terms_path=terms,
            hnsw_ef=settings.ann_ef,
        )
    if location.kind == "falkordb":
        from ragline.store.graph import GraphStore

        return GraphStore(
            location.target,
            dimension=dimension,
            graph=location.options.get("graph") or "ragline",
            hnsw_m=settings.hnsw_m,
            hnsw_ef_construction=settings.hnsw_ef_construction,
            hnsw_ef=max(settings.ann_ef, 200),
            boosts=settings.boosts,
        )
    from ragline.store.lance import LanceStore

    return LanceStore(
        Path(location.target),
        dimension=dimension,
        ann_min_rows=settings.ann_min_rows,
        ann_ef=settings.ann_ef,
        ann_nprobes=settings.ann_nprobes,
        ann_refine_factor=settings.ann_refine_factor,
        memory_index=settings.lance_memory_index,
        memory_rows=settings.lance_memory_rows,
        int8_rows=settings.lance_int8_rows,
        int8_rerank=settings.lance_int8_rerank,
        int8_threads=settings.lance_int8_threads,
        int8_dims=settings.lance_int8_dims,
        int8_dims_rerank=settings.lance_int8_dims_rerank,
        bm25_prune_rows=settings.lance_bm25_prune_rows,
        parallel_rows=settings.lance_parallel_rows,
    )


def missing_index(settings: Settings) -> Path | None:
    """The folder an embedded index (LanceDB, Qdrant or Chroma local) should be in,
    when it is not there; None when it is, or when the store is a server (whose
    emptiness only the server can tell).

    Read commands check this first: opening the store would create an empty index
    in the wrong folder and answer "no results" as if the documents said nothing."""
    location = store_location(settings)
    if location.kind == "lance" or (
        location.kind in ("qdrant", "chroma") and "://" not in location.target
    ):
        folder = Path(location.target)
        return None if folder.is_dir() else folder
    return None


def make_store(settings: Settings, dimension: int) -> IndexStore:
    """The store ``STORE_URL`` names; the embedded LanceDB index in
    ``settings.index_dir`` when it is empty (the default)."""
    return open_store(store_location(settings), settings, dimension)
