"""``PATH`` or ``lance://PATH``: the embedded LanceDB index in folder ``PATH`` (the
default store: an empty STORE_URL is the index in ``RAGLINE_INDEX_DIR``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragline.store.address import StoreBackend, StoreLocation, StoreUrlError

if TYPE_CHECKING:
    from ragline.settings import Settings
    from ragline.store.base import IndexStore


def lance_in(folder: str | Path) -> StoreLocation:
    """The LanceDB index kept in ``folder`` (its tables in ``folder/lance``)."""
    return StoreLocation("lance", str(Path(folder) / "lance"))


def parse(scheme: str, text: str) -> StoreLocation:
    folder = text.partition("://")[2]
    if not folder:
        raise StoreUrlError("STORE_URL lance:// needs a folder, e.g. lance:///srv/index")
    return lance_in(folder)


def open_store(location: StoreLocation, settings: Settings, dimension: int) -> IndexStore:
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


def in_folder(location: StoreLocation) -> bool:
    return True


LANCE = StoreBackend("lance", ("lance",), parse, open_store, in_folder)
