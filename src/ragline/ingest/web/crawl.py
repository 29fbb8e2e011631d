"""Which pages one web ingest covers: one page, a sitemap's pages, or a same-site crawl.

Breadth first from the start URL, within its folder on its site (:func:`scope_of`),
at most ``max_pages`` fetches and ``max_depth`` links away; robots.txt is asked
before every fetch. A page known from an earlier crawl is fetched conditionally:
a 304 costs no body and the links recorded last time are followed. The fetcher,
robots rules and the cache lookup are passed in, so the walk is testable alone.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ragline.ingest.web.cache import CachedPage
from ragline.ingest.web.fetch import FetchError, FetchResult, Validators
from ragline.ingest.web.links import looks_like_sitemap, page_links, sitemap_entries
from ragline.ingest.web.urls import in_scope, is_asset, normalize, scope_of

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class PageFetcher(Protocol):
    def get(self, url: str, validators: Validators | None = None) -> FetchResult: ...


class RobotsRules(Protocol):
    def allowed(self, url: str) -> bool: ...

    def unavailable(self, url: str) -> str:
        """Non-empty when the site's robots.txt could not be read (nothing is fetched,
        and the pages count as failed, not as gone)."""
        ...


@dataclass(frozen=True, slots=True)
class CrawledPage:
    """A page fetched with its body (new or changed since the last crawl, or unknown)."""

    url: str  # as requested (the cache's key; redirects are followed)
    source: str  # canonical URL: the document's identity
    result: FetchResult
    links: tuple[str, ...]
    content_hash: str


@dataclass(slots=True)
class CrawlResult:
    start: str
    scope: str  # URL prefix the crawl stayed in; documents under it may be deleted
    mode: str  # "page" | "crawl" | "sitemap"
    pages: list[CrawledPage] = field(default_factory=list)
    unchanged: list[CachedPage] = field(default_factory=list)  # answered 304
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, reason): kept
    gone: list[str] = field(default_factory=list)  # 404 / 410: deleted
    blocked: list[str] = field(default_factory=list)  # disallowed by robots.txt
    duplicates: list[str] = field(default_factory=list)  # same canonical URL as another
    truncated: bool = False  # the page limit stopped the crawl before its end

    @property
    def complete(self) -> bool:
        """Every page in scope was reached, so absent documents are really gone."""
        return not self.truncated


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def crawl(
    start: str,
    fetcher: PageFetcher,
    robots: RobotsRules,
    known: Callable[[str], CachedPage | None],
    *,
    max_pages: int,
    max_depth: int,
) -> CrawlResult:
    """Walk from ``start``; see the module docstring."""
    start = normalize(start)
    # One page is its own scope: ingesting it must not delete its neighbours.
    one = max_depth == 0
    result = CrawlResult(start, start if one else scope_of(start), "page" if one else "crawl")
    queue: deque[tuple[str, int]] = deque([(start, 0)])
    queued = {start}
    sources: set[str] = set()
    fetches = 0
    follow_depth = max_depth
    while queue:
        if fetches >= max_pages:
            result.truncated = True
            break
        url, depth = queue.popleft()
        cached = known(url)
        links: tuple[str, ...] = ()
        failure = ""
        if not robots.allowed(url):
            failure = robots.unavailable(url)
            if not failure:
                result.blocked.append(url)
                continue
        else:
            fetches += 1
            try:
                got = fetcher.get(url, cached.validators if cached else None)
            except FetchError as e:
                if e.gone:
                    result.gone.append(url)
                    continue
                failure = str(e)
        if failure:
            # A failure is not a deletion: the page keeps its document, and the links
            # it had last time are still followed, so the crawl stays complete.
            result.failed.append((url, failure))
            links = cached.links if cached else ()
        elif got.not_modified and cached is not None:
            if _seen_before(url, cached.source, sources, result):
                continue
            result.unchanged.append(cached)
            links = cached.links
        else:
            if url == start and looks_like_sitemap(got.data):
                result.mode = "sitemap"
                result.scope = scope_of(start)  # the sitemap lists its folder's pages
                fetches -= 1  # the sitemap is not a page
                follow_depth = 0
                try:
                    _read_sitemap(got, fetcher, robots, queue, queued, result)
                except (ValueError, FetchError) as e:
                    result.failed.append((url, str(e)))
                continue
            page = _page(url, got)
            if _seen_before(url, page.source, sources, result):
                continue
            result.pages.append(page)
            links = page.links
        if depth >= follow_depth:
            continue
        for link in links:
            if link not in queued and in_scope(link, result.scope) and not is_asset(link):
                queued.add(link)
                queue.append((link, depth + 1))
    return result


def _seen_before(url: str, source: str, sources: set[str], result: CrawlResult) -> bool:
    """Whether another URL already gave this canonical ``source`` (then ``url`` is
    listed as a duplicate); else ``source`` is taken, for this ``url``."""
    if source in sources:
        result.duplicates.append(url)
        return True
    sources.add(source)
    return False


def _page(url: str, got: FetchResult) -> CrawledPage:
    final = normalize(got.url)
    source = final
    links: tuple[str, ...] = ()
    if got.content_type in HTML_TYPES or not got.content_type:
        found = page_links(got.text(), final)
        source = found.canonical or final
        links = () if found.nofollow else found.links
    return CrawledPage(url, source, got, links, content_hash(got.data))


def _read_sitemap(
    got: FetchResult,
    fetcher: PageFetcher,
    robots: RobotsRules,
    queue: deque[tuple[str, int]],
    queued: set[str],
    result: CrawlResult,
) -> None:
    """Queue a sitemap's pages (following a sitemap index one level down)."""
    entries = sitemap_entries(got.data, got.url)
    pages = list(entries.pages)
    for child in entries.sitemaps:
        if not robots.allowed(child):
            result.blocked.append(child)
            continue
        try:
            pages += sitemap_entries(fetcher.get(child).data, child).pages
        except (ValueError, FetchError) as e:
            result.failed.append((child, str(e)))
    for page in pages:
        if page not in queued and not is_asset(page):
            queued.add(page)
            queue.append((page, 0))
