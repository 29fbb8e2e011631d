"""ChromaStore: ragline's store on ChromaDB (see :mod:`ragline.store.chroma.store`)."""

from ragline.store.chroma.store import ChromaStore

__all__ = ["ChromaStore"]
