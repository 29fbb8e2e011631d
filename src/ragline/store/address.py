"""Where an index lives (:class:`StoreLocation`), and the one record through which a
store backend tells ragline its URL schemes and how to open it (:class:`StoreBackend`).

Each backend keeps its own record in its ``address`` module (``store/<name>/address.py``,
light: the client library is imported only by ``open``); :mod:`ragline.store.url`
lists the records. Parsing is pure: nothing is opened here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

from ragline.errors import InputError

if TYPE_CHECKING:
    from ragline.settings import Settings
    from ragline.store.base import IndexStore

#: Option names whose values are never shown in a description.
_SECRET_OPTIONS = frozenset({"api_key", "password", "token"})


class StoreUrlError(InputError, ValueError):
    """A STORE_URL (or DATABASE_URL) that names no store ragline knows."""


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where an index lives: the kind of store (a backend's ``kind``), its address and
    the options given.

    ``target``: a folder (lance, qdrant and chroma local), a libpq URL without
    ragline's own parameters (postgres) or the server's URL (``http://…``,
    ``redis://…``).
    """

    kind: str
    target: str
    options: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """The location without secrets (passwords, API keys), for messages."""
        if self.kind == "lance":
            return f"lance://{self.target}"
        parts = urlsplit(self.target)
        if not parts.scheme:
            return f"{self.kind}+local://{self.target}"
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        scheme = f"{self.kind}+https" if parts.scheme == "https" else self.kind
        shown = {k: v for k, v in self.options.items() if k not in _SECRET_OPTIONS}
        query = f"?{urlencode(shown)}" if shown else ""
        return f"{scheme}://{host}{parts.path}{query}"


def _never_missing(location: StoreLocation) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class StoreBackend:
    """What ragline needs to know of a store before opening it.

    ``parse(scheme, url)`` turns a STORE_URL with one of ``schemes`` into a location
    (raising :class:`StoreUrlError` naming what is wrong); ``open`` opens (creating if
    needed) the store there with the settings' tuning and the embedding dimension;
    ``in_folder(location)`` is true when the index lives in a local folder, which read
    commands check exists before opening (opening would create an empty index).
    """

    kind: str
    schemes: tuple[str, ...]
    parse: Callable[[str, str], StoreLocation]
    open: Callable[[StoreLocation, Settings, int], IndexStore]
    in_folder: Callable[[StoreLocation], bool] = _never_missing


def folder_target(location: StoreLocation) -> bool:
    """``in_folder`` of a backend with a local mode: the target is a folder, not a URL."""
    return "://" not in location.target


def url_options(query: str, text: str, *known: str) -> dict[str, str]:
    """A URL's query parameters, each one of ``known`` (else an error naming them)."""
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = ", ".join(sorted(known)) if known else "no parameters"
        raise StoreUrlError(
            f"STORE_URL {safe_url(text)}: unknown parameter(s) {', '.join(unknown)}; "
            f"it takes {takes}"
        )
    return options


def local_folder(scheme: str, text: str) -> tuple[str, str]:
    """``SCHEME://PATH?QUERY`` → (PATH, QUERY); PATH must not be empty."""
    path, _, query = text.partition("://")[2].partition("?")
    if not path:
        raise StoreUrlError(f"STORE_URL {scheme}:// needs a folder")
    return path, query


def server_and_name(text: str, example: str) -> tuple[str, str]:
    """``SCHEME://HOST[:PORT][/NAME]`` with no parameters → (``HOST[:PORT]``, NAME);
    NAME defaults to ``ragline``."""
    parts = urlsplit(text)
    if not parts.hostname:
        raise StoreUrlError(f"STORE_URL {safe_url(text)}: no host ({example})")
    if parts.query:
        raise StoreUrlError(f"STORE_URL {safe_url(text)}: takes no parameters ({example})")
    name = parts.path.strip("/") or "ragline"
    if "/" in name:
        raise StoreUrlError(f"STORE_URL {safe_url(text)}: one name after the host ({example})")
    return netloc(text), name


def netloc(text: str) -> str:
    """``HOST[:PORT]`` of a URL, without user and password."""
    parts = urlsplit(text)
    return (parts.hostname or "") + (f":{parts.port}" if parts.port else "")


def safe_url(text: str) -> str:
    """A URL for an error message: the password and query (keys) left out."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return "(unparsable URL)"
    return f"{parts.scheme}://{netloc(text)}{parts.path}" if parts.scheme else text
