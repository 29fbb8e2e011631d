"""URL helpers of the web ingester (pure): normal form, scope, what is worth fetching."""

from __future__ import annotations

import posixpath
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

#: Link targets that are never documents: skipped without spending a fetch on them.
ASSET_SUFFIXES = frozenset(
    {
        *(".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".bmp", ".avif"),
        *(".css", ".js", ".mjs", ".map", ".json", ".woff", ".woff2", ".ttf", ".eot"),
        *(".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".7z", ".whl", ".exe", ".dmg"),
        *(".mp3", ".mp4", ".webm", ".ogg", ".wav", ".avi", ".mov"),
    }
)


def is_url(text: str) -> bool:
    """Is ``text`` an http(s) URL (what `ragline ingest` crawls instead of a path)?"""
    parts = urlsplit(text.strip())
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc)


def normalize(url: str, base: str | None = None) -> str:
    """Absolute URL without fragment, scheme and host lower case, default port dropped
    and an empty path written ``/``: two spellings of one page compare equal."""
    joined = urljoin(base, url) if base else url
    joined, _frag = urldefrag(joined.strip())
    p = urlsplit(joined)
    scheme = p.scheme.lower()
    host = (p.hostname or "").lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = p.port
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, p.path or "/", p.query, ""))


def origin(url: str) -> str:
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


def scope_of(start: str) -> str:
    """The URL prefix a crawl from ``start`` stays in: its folder on its site
    (``https://h/docs/intro.html`` → ``https://h/docs/``)."""
    p = urlsplit(start)
    folder = p.path if p.path.endswith("/") else posixpath.dirname(p.path)
    folder = folder.rstrip("/") + "/"
    return f"{p.scheme}://{p.netloc}{folder}"


def in_scope(url: str, scope: str) -> bool:
    return url.startswith(scope)


def is_asset(url: str) -> bool:
    """Images, scripts, archives…: never a document, so never fetched."""
    path = urlsplit(url).path.lower()
    return posixpath.splitext(path)[1] in ASSET_SUFFIXES


def chapter_of_url(url: str, scope: str) -> str:
    """The first folder under the crawl's scope, like files' first folder under the root."""
    if not url.startswith(scope):
        return ""
    rest = urlsplit(url[len(scope) :]).path
    parts = [p for p in rest.split("/") if p]
    return parts[0] if len(parts) > 1 else ""
