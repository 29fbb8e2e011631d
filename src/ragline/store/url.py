"""``STORE_URL``: which store an index lives in, as one string.

=====================================  ==============================================
``""`` (default)                       the embedded LanceDB index in ``RAGLINE_INDEX_DIR``
``PATH`` or ``lance://PATH``           the embedded LanceDB index in folder ``PATH``
``postgres://…`` / ``postgresql://…``  PostgreSQL + pgvector (``?schema=NAME`` puts
                                       ragline's tables in that schema)
``postgres`` / ``postgresql``          PostgreSQL at ``DATABASE_URL``
``qdrant://HOST:PORT``                 a Qdrant server or cluster over HTTP
``qdrant+https://HOST:PORT``           the same over HTTPS
``qdrant+local://PATH``                Qdrant's local mode in folder ``PATH``
``chroma://HOST:PORT/COLLECTION``      a ChromaDB server (``chroma run``) over HTTP
``chroma+https://HOST:PORT/COLL…``     the same over HTTPS
``chroma+local://PATH``                ChromaDB in-process, data in folder ``PATH``
``falkordb://HOST:PORT/GRAPH``         a FalkorDB server (Cypher graph store)
=====================================  ==============================================

Qdrant URLs take ``?collection=NAME`` (default ``ragline``) and ``?api_key=KEY``;
``chroma+local://`` takes ``?collection=NAME``; the collection or graph name in
a path defaults to ``ragline``.

Each scheme belongs to one backend's :class:`~ragline.store.address.StoreBackend`
(its ``address`` module); :data:`BACKENDS` lists them, and a new store adds its line
there. Parsing is pure: nothing is opened here (see :mod:`ragline.store.factory`).
"""

from __future__ import annotations

from pathlib import Path

from ragline.store.address import StoreBackend, StoreLocation, StoreUrlError, safe_url
from ragline.store.chroma.address import CHROMA
from ragline.store.graph.address import FALKORDB
from ragline.store.lance_address import LANCE, lance_in
from ragline.store.postgres.address import POSTGRES
from ragline.store.qdrant.address import QDRANT

__all__ = ["BACKENDS", "StoreLocation", "StoreUrlError", "backend", "parse_store_url"]

#: Every store ragline can open, by the schemes of its URLs.
BACKENDS: tuple[StoreBackend, ...] = (LANCE, POSTGRES, QDRANT, CHROMA, FALKORDB)

#: A bare word for the PostgreSQL server ``DATABASE_URL`` names.
_DATABASE_URL_ALIASES = ("postgres", "postgresql")


def backend(kind: str) -> StoreBackend:
    """The backend of a location's ``kind``."""
    for b in BACKENDS:
        if b.kind == kind:
            return b
    raise StoreUrlError(f"no store backend of kind {kind!r}")


def parse_store_url(url: str, index_dir: Path, database_url: str = "") -> StoreLocation:
    """The store a STORE_URL names; ``index_dir`` is the default LanceDB home and
    ``database_url`` what a bare ``postgres`` refers to."""
    text = url.strip()
    if not text:
        return lance_in(index_dir)
    if text.lower() in _DATABASE_URL_ALIASES:
        if not database_url.strip():
            raise StoreUrlError(f"STORE_URL={text!r} needs DATABASE_URL (postgres://…)")
        if database_url.strip().lower() in _DATABASE_URL_ALIASES:
            raise StoreUrlError("DATABASE_URL must be a postgres://… URL")
        return parse_store_url(database_url, index_dir)
    scheme, sep, _ = text.partition("://")
    if not sep:
        return lance_in(text)
    scheme = scheme.lower()
    for b in BACKENDS:
        if scheme in b.schemes:
            return b.parse(scheme, text)
    known = ", ".join(f"{s}://" for b in BACKENDS for s in b.schemes)
    raise StoreUrlError(
        f"STORE_URL {safe_url(text)}: unknown scheme {scheme!r}; use a folder or one of {known}"
    )
