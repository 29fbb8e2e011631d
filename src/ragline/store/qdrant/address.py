"""``qdrant://HOST:PORT`` (``qdrant+https://`` over HTTPS) for a Qdrant server or
cluster, ``qdrant+local://PATH`` for Qdrant's local mode in a folder; both take
``?collection=NAME`` (default ``ragline``) and ``?api_key=KEY``."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from ragline.store.address import (
    StoreBackend,
    StoreLocation,
    StoreUrlError,
    folder_target,
    local_folder,
    netloc,
    safe_url,
    url_options,
)

if TYPE_CHECKING:
    from ragline.settings import Settings
    from ragline.store.base import IndexStore

_PARAMS = ("collection", "api_key")


def parse(scheme: str, text: str) -> StoreLocation:
    if scheme == "qdrant+local":
        path, query = local_folder(scheme, text)
        return StoreLocation("qdrant", path, url_options(query, text, *_PARAMS))
    parts = urlsplit(text)
    if not parts.hostname:
        raise StoreUrlError(f"STORE_URL {safe_url(text)}: no host (qdrant://HOST:PORT)")
    http = "https" if scheme == "qdrant+https" else "http"
    target = urlunsplit((http, netloc(text), parts.path, "", ""))
    return StoreLocation("qdrant", target, url_options(parts.query, text, *_PARAMS))


def open_store(location: StoreLocation, settings: Settings, dimension: int) -> IndexStore:
    from ragline.store.qdrant.store import QdrantStore

    return QdrantStore(
        location.target,
        dimension=dimension,
        collection=location.options.get("collection") or "ragline",
        api_key=location.options.get("api_key") or None,
    )


_SCHEMES = ("qdrant", "qdrant+http", "qdrant+https", "qdrant+local")
QDRANT = StoreBackend("qdrant", _SCHEMES, parse, open_store, folder_target)
