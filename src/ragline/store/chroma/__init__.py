"""ChromaStore: ragline's store on ChromaDB (see :mod:`ragline.store.chroma.store`)."""

from typing import TYPE_CHECKING

from ragline.lazy import lazy_getattr

if TYPE_CHECKING:
    from ragline.store.chroma.store import ChromaStore

# Imported on first use: ``store.url`` reads ``.address``, and a search on another
# store should not import this one (≈ 48 ms at a cold ``ragline search``).
__getattr__ = lazy_getattr(__name__, {"ChromaStore": "ragline.store.chroma.store"}, globals())

__all__ = ["ChromaStore"]
