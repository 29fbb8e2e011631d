"""``chroma://HOST:PORT/COLLECTION`` (``chroma+https://`` over HTTPS) for a ChromaDB
server (``chroma run``), ``chroma+local://PATH?collection=NAME`` for ChromaDB
in-process with its data in a folder; the collection defaults to ``ragline``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragline.store.address import (
    StoreBackend,
    StoreLocation,
    folder_target,
    local_folder,
    server_and_name,
    url_options,
)

if TYPE_CHECKING:
    from ragline.settings import Settings
    from ragline.store.base import IndexStore


def parse(scheme: str, text: str) -> StoreLocation:
    if scheme == "chroma+local":
        path, query = local_folder(scheme, text)
        return StoreLocation("chroma", path, url_options(query, text, "collection"))
    server, name = server_and_name(text, "chroma://HOST:PORT/NAME")
    http = "https" if scheme == "chroma+https" else "http"
    return StoreLocation("chroma", f"{http}://{server}", {"collection": name})


def open_store(location: StoreLocation, settings: Settings, dimension: int) -> IndexStore:
    from ragline.store.chroma.store import ChromaStore

    collection = location.options.get("collection") or "ragline"
    terms = None
    if not folder_target(location):  # a server: its BM25 term index is kept beside ragline's index
        host = location.target.split("://", 1)[1].replace(":", "_")
        terms = Path(settings.index_dir) / "chroma" / f"{host}_{collection}.sqlite"
    return ChromaStore(
        location.target,
        dimension=dimension,
        collection=collection,
        terms_path=terms,
        hnsw_ef=settings.ann_ef,
    )


_SCHEMES = ("chroma", "chroma+http", "chroma+https", "chroma+local")
CHROMA = StoreBackend("chroma", _SCHEMES, parse, open_store, folder_target)
