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
Parsing is pure: nothing is opened here (see :mod:`ragline.store.factory`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ragline.errors import InputError

StoreKind = Literal["lance", "postgres", "qdrant", "chroma", "falkordb"]

_POSTGRES_SCHEMES = ("postgres", "postgresql")
#: Query parameters ragline reads itself (libpq would reject them).
_PG_OWN_PARAMS = frozenset({"schema"})
_QDRANT_PARAMS = frozenset({"collection", "api_key"})


class StoreUrlError(InputError, ValueError):
    """A STORE_URL (or DATABASE_URL) that names no store ragline knows."""


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where an index lives: the kind of store, its address and the options given.

    ``target``: a folder (lance, qdrant local), a libpq URL without ragline's own
    parameters (postgres) or a Qdrant URL (``qdrant://…``, ``https://…``).
    """

    kind: StoreKind
    target: str
    options: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """The location without secrets (passwords, API keys), for messages."""
        if self.kind == "lance":
            return f"lance://{self.target}"
        parts = urlsplit(self.target)
        if self.kind in ("qdrant", "chroma") and not parts.scheme:
            return f"{self.kind}+local://{self.target}"
        if self.kind == "falkordb":
            return f"falkordb://{parts.hostname}:{parts.port}/{self.options.get('graph', '')}"
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        extra = {k: v for k, v in self.options.items() if k != "api_key"}
        query = f"?{urlencode(extra)}" if extra else ""
        return f"{parts.scheme}://{host}{parts.path}{query}"


def parse_store_url(url: str, index_dir: Path, database_url: str = "") -> StoreLocation:
    """The store a STORE_URL names; ``index_dir`` is the default LanceDB home and
    ``database_url`` what a bare ``postgres`` refers to."""
    text = url.strip()
    if not text:
        return StoreLocation("lance", str(index_dir / "lance"))
    if text.lower() in _POSTGRES_SCHEMES:
        if not database_url.strip():
            raise StoreUrlError(f"STORE_URL={text!r} needs DATABASE_URL (postgres://…)")
        if database_url.strip().lower() in _POSTGRES_SCHEMES:
            raise StoreUrlError("DATABASE_URL must be a postgres://… URL")
        return parse_store_url(database_url, index_dir)
    scheme, sep, rest = text.partition("://")
    if not sep:
        return StoreLocation("lance", str(Path(text) / "lance"))
    scheme = scheme.lower()
    if scheme == "lance":
        if not rest:
            raise StoreUrlError("STORE_URL lance:// needs a folder, e.g. lance:///srv/index")
        return StoreLocation("lance", str(Path(rest) / "lance"))
    if scheme in _POSTGRES_SCHEMES:
        return _postgres(text)
    if scheme == "qdrant+local":
        path, _, query = rest.partition("?")
        if not path:
            raise StoreUrlError("STORE_URL qdrant+local:// needs a folder")
        return StoreLocation("qdrant", path, _qdrant_options(query, text))
    if scheme in ("qdrant", "qdrant+http", "qdrant+https"):
        parts = urlsplit(text)
        if not parts.hostname:
            raise StoreUrlError(f"STORE_URL {_safe(text)}: no host (qdrant://HOST:PORT)")
        http = "https" if scheme == "qdrant+https" else "http"
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        target = urlunsplit((http, netloc, parts.path, "", ""))
        return StoreLocation("qdrant", target, _qdrant_options(parts.query, text))
    if scheme == "chroma+local":
        path, _, query = rest.partition("?")
        if not path:
            raise StoreUrlError("STORE_URL chroma+local:// needs a folder")
        return StoreLocation("chroma", path, _named_options(query, text, "collection"))
    if scheme in ("chroma", "chroma+http", "chroma+https", "falkordb"):
        return _server(scheme, text)
    raise StoreUrlError(
        f"STORE_URL {_safe(text)}: unknown scheme {scheme!r}; use a folder, lance://, "
        "postgres://, qdrant://, qdrant+local://, chroma://, chroma+local:// or falkordb://"
    )


def _server(scheme: str, text: str) -> StoreLocation:
    """``chroma://HOST:PORT/COLLECTION`` or ``falkordb://HOST:PORT/GRAPH``."""
    parts = urlsplit(text)
    example = "falkordb://HOST:PORT/GRAPH" if scheme == "falkordb" else "chroma://HOST:PORT/NAME"
    if not parts.hostname:
        raise StoreUrlError(f"STORE_URL {_safe(text)}: no host ({example})")
    if parts.query:
        raise StoreUrlError(f"STORE_URL {_safe(text)}: takes no parameters ({example})")
    name = parts.path.strip("/") or "ragline"
    if "/" in name:
        raise StoreUrlError(f"STORE_URL {_safe(text)}: one name after the host ({example})")
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    if scheme == "falkordb":
        return StoreLocation("falkordb", f"redis://{netloc}", {"graph": name})
    http = "https" if scheme == "chroma+https" else "http"
    return StoreLocation("chroma", f"{http}://{netloc}", {"collection": name})


def _named_options(query: str, text: str, *known: str) -> dict[str, str]:
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise StoreUrlError(
            f"STORE_URL {_safe(text)}: unknown parameter(s) {', '.join(unknown)}; "
            f"it takes {', '.join(known)}"
        )
    return options


def _postgres(text: str) -> StoreLocation:
    parts = urlsplit(text)
    own: dict[str, str] = {}
    kept: list[tuple[str, str]] = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _PG_OWN_PARAMS:
            own[key] = value
        else:
            kept.append((key, value))
    schema = own.get("schema", "")
    if "schema" in own and not schema:
        raise StoreUrlError(f"STORE_URL {_safe(text)}: empty ?schema=")
    target = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return StoreLocation("postgres", target, own)


def _qdrant_options(query: str, text: str) -> dict[str, str]:
    options = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(options) - _QDRANT_PARAMS)
    if unknown:
        raise StoreUrlError(
            f"STORE_URL {_safe(text)}: unknown parameter(s) {', '.join(unknown)}; "
            f"Qdrant URLs take {', '.join(sorted(_QDRANT_PARAMS))}"
        )
    return options


def _safe(text: str) -> str:
    """A URL for an error message: the password and query (keys) left out."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return "(unparsable URL)"
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else text
