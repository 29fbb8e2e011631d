"""GraphStore: ragline's store as a Cypher graph on FalkorDB (see :mod:`.store`)."""

from ragline.store.graph.store import GraphStore

__all__ = ["GraphStore"]
