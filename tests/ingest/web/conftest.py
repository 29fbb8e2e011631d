"""A real HTTP server on 127.0.0.1 serving a small generated site (threads, stdlib).

The site lives in memory, so a test can edit or remove a page between crawls;
every request is logged with its status, so a test can count 200s and 304s.
Pages carry an ETag and Last-Modified and answer conditional GETs with 304,
unless the site is told not to send validators.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest


def page(title: str, body: str, *, links: tuple[str, ...] = (), canonical: str = "") -> str:
    canon = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    nav = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><title>{title}</title>{canon}"
        '<link rel="stylesheet" href="/docs/style.css"></head>'
        f"<body><nav><ul>{nav}</ul></nav><main><h1>{title}</h1>{body}</main>"
        f"<footer>{''.join(f'<a href={h!r}>x</a>' for h in links)}</footer></body></html>"
    )


def default_site() -> dict[str, tuple[str, str]]:
    """path -> (content type, body)."""
    html = "text/html; charset=utf-8"
    return {
        "/robots.txt": (
            "text/plain",
            "User-agent: *\nDisallow: /docs/private/\n",
        ),
        "/docs/index.html": (
            html,
            page(
                "Handbook",
                "<p>The handbook of the lighthouse keepers covers installation and usage.</p>",
                links=(
                    "guide/install.html",
                    "guide/usage.html?ref=nav#top",
                    "private/secret.html",
                    "faq.html",
                    "style.css",
                    "/other/outside.html",
                    "http://192.0.2.1/elsewhere.html",
                    "mailto:keeper@example.org",
                ),
            ),
        ),
        "/docs/guide/install.html": (
            html,
            page(
                "Installing the lamp",
                "<h2>Wicks</h2><p>Trim the paraffin wick before lighting the Fresnel lamp.</p>",
                links=("../deep/level2.html", "../index.html"),
                canonical="/docs/guide/install.html",
            ),
        ),
        "/docs/guide/usage.html": (
            html,
            page(
                "Using the foghorn",
                "<p>Sound the foghorn every thirty seconds when visibility drops.</p>",
                canonical="http://127.0.0.1:{port}/docs/guide/usage.html",
            ),
        ),
        "/docs/deep/level2.html": (
            html,
            page(
                "Logbook",
                "<p>Write the barometer reading into the logbook each watch.</p>",
                links=("level3.html",),
            ),
        ),
        "/docs/deep/level3.html": (
            html,
            page(
                "Storm drill",
                "<p>During a storm drill the keeper secures the gallery shutters.</p>",
                links=("level4.html",),
            ),
        ),
        "/docs/deep/level4.html": (
            html,
            page("Too deep", "<p>Beyond the crawl depth: seagull census figures.</p>"),
        ),
        "/docs/faq.html": (
            html,
            page("FAQ", "<p>Keepers are relieved by boat every second Tuesday.</p>"),
        ),
        "/docs/private/secret.html": (
            html,
            page("Secret", "<p>The private cellar holds the smuggled marmalade.</p>"),
        ),
        "/other/outside.html": (
            html,
            page("Outside", "<p>Outside the crawl scope: the harbour master's tide table.</p>"),
        ),
        "/docs/style.css": ("text/css", "body { color: black }"),
        "/docs/sitemap.xml": (
            "application/xml",
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            "<url><loc>http://127.0.0.1:{port}/docs/faq.html</loc></url>"
            "<url><loc>http://127.0.0.1:{port}/docs/deep/level4.html</loc></url>"
            "<url><loc>http://127.0.0.1:{port}/docs/private/secret.html</loc></url>"
            "</urlset>",
        ),
    }


@dataclass
class Site:
    """The served site; edit ``pages`` between crawls."""

    port: int = 0
    pages: dict[str, tuple[str, str]] = field(default_factory=default_site)
    validators: bool = True
    etag: bool = True  # False: Last-Modified only
    failing: dict[str, int] = field(default_factory=dict)  # path -> error status to answer
    log: list[tuple[str, int]] = field(default_factory=list)
    times: list[tuple[str, float]] = field(default_factory=list)  # path, monotonic arrival
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def statuses(self, status: int) -> list[str]:
        with self.lock:
            return [p for p, s in self.log if s == status and p != "/robots.txt"]

    def clear_log(self) -> None:
        with self.lock:
            self.log.clear()

    def edit(self, path: str, old: str, new: str) -> None:
        kind, body = self.pages[path]
        assert old in body
        self.pages[path] = (kind, body.replace(old, new))


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            with site.lock:
                site.times.append((path, time.monotonic()))
            if path in site.failing:
                self._answer(site.failing[path], b"server error", "text/plain", {})
                return
            found = site.pages.get(path)
            if found is None:
                self._answer(404, b"not found", "text/plain", {})
                return
            kind, text = found
            body = text.replace("{port}", str(site.port)).encode()
            headers: dict[str, str] = {}
            if site.validators:
                etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
                # a page's time: from its content, so an edit makes it newer
                stamp = formatdate(1_700_000_000 + int(etag[1:9], 16) % 10**6, usegmt=True)
                headers = {"Last-Modified": stamp}
                if site.etag:
                    headers["ETag"] = etag
                    fresh = self.headers.get("If-None-Match") == etag
                else:
                    fresh = self.headers.get("If-Modified-Since") == stamp
                if fresh:
                    self._answer(304, b"", kind, headers)
                    return
            self._answer(200, body, kind, headers)

        def _answer(self, status: int, body: bytes, kind: str, headers: dict[str, str]) -> None:
            with site.lock:
                site.log.append((urlsplit(self.path).path, status))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            for k, v in headers.items():
                self.send_header(k, v)
            if status != 304:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(s))
    s.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        server.shutdown()
        server.server_close()
