"""Choose the store from settings, in one place: ``STORE_URL`` (see :mod:`ragline.store.url`)."""

from __future__ import annotations

from pathlib import Path

from ragline.settings import Settings
from ragline.store.base import IndexStore, StoreError
from ragline.store.url import StoreLocation, StoreUrlError, backend, parse_store_url


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
    return backend(location.kind).open(location, settings, dimension)


def missing_index(settings: Settings) -> Path | None:
    """The folder an embedded index (LanceDB, Qdrant or Chroma local) should be in,
    when it is not there; None when it is, or when the store is a server (whose
    emptiness only the server can tell).

    Read commands check this first: opening the store would create an empty index
    in the wrong folder and answer "no results" as if the documents said nothing."""
    location = store_location(settings)
    if not backend(location.kind).in_folder(location):
        return None
    folder = Path(location.target)
    return None if folder.is_dir() else folder


def make_store(settings: Settings, dimension: int) -> IndexStore:
    """The store ``STORE_URL`` names; the embedded LanceDB index in
    ``settings.index_dir`` when it is empty (the default)."""
    return open_store(store_location(settings), settings, dimension)
