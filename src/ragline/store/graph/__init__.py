"""GraphStore: ragline's store as a Cypher graph on FalkorDB (see :mod:`.store`)."""

from typing import TYPE_CHECKING

from ragline.lazy import lazy_getattr

if TYPE_CHECKING:
    from ragline.store.graph.store import GraphStore

# Imported on first use: ``store.url`` reads ``.address``, and a search on another
# store should not import this one (≈ 18 ms at a cold ``ragline search``).
__getattr__ = lazy_getattr(__name__, {"GraphStore": "ragline.store.graph.store"}, globals())

__all__ = ["GraphStore"]
