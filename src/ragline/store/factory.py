"""Choose the store from settings, in one place."""

from __future__ import annotations

from ragline.settings import Settings
from ragline.store.base import Store


def make_store(settings: Settings, dimension: int) -> Store:
    """The embedded LanceDB index in ``settings.index_dir`` (the default)."""
    from ragline.store.lance import LanceStore

    return LanceStore(
        settings.index_dir / "lance",
        dimension=dimension,
        ann_min_rows=settings.ann_min_rows,
        ann_ef=settings.ann_ef,
        ann_nprobes=settings.ann_nprobes,
    )
