"""What a fetched page or sitemap points at (pure): links, the canonical URL, sitemap entries."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from bs4 import BeautifulSoup
from bs4.element import Tag

from ragline.ingest.web.urls import normalize, origin


@dataclass(frozen=True, slots=True)
class PageLinks:
    canonical: str | None  # <link rel=canonical>, when it stays on the page's site
    links: tuple[str, ...]  # <a href> targets, absolute and normalised, in page order
    nofollow: bool = False  # <meta name=robots content=nofollow>


def page_links(html: str, url: str) -> PageLinks:
    """Links and canonical URL of an HTML page fetched from ``url``.

    A ``<base href>`` changes what relative links resolve against. A canonical URL
    on another site is ignored: it would let a page overwrite another site's
    document in the index.
    """
    soup = BeautifulSoup(html, "html.parser")
    base = url
    base_tag = soup.find("base", href=True)
    if isinstance(base_tag, Tag):
        base = normalize(str(base_tag["href"]), url)
    canonical = None
    for link in soup.find_all("link", href=True):
        if "canonical" in _rels(link):
            candidate = normalize(str(link["href"]), base)
            if origin(candidate) == origin(url):
                canonical = candidate
            break
    nofollow = False
    for meta in soup.find_all("meta", attrs={"name": True, "content": True}):
        if str(meta["name"]).lower() == "robots" and "nofollow" in str(meta["content"]).lower():
            nofollow = True
    links: list[str] = []
    seen: set[str] = set()
    for a in soup.find_all("a", href=True):
        href = str(a["href"]).strip()
        if not href or href.startswith(("mailto:", "javascript:", "tel:", "#")):
            continue
        if "nofollow" in _rels(a):
            continue
        target = normalize(href, base)
        if target.startswith(("http://", "https://")) and target not in seen:
            seen.add(target)
            links.append(target)
    return PageLinks(canonical, tuple(links), nofollow)


def _rels(tag: Tag) -> set[str]:
    value = tag.get("rel")
    items = value if isinstance(value, list) else str(value or "").split()
    return {str(r).lower() for r in items}


@dataclass(frozen=True, slots=True)
class SitemapEntries:
    pages: tuple[str, ...]  # <urlset><url><loc>
    sitemaps: tuple[str, ...]  # <sitemapindex><sitemap><loc>: more sitemaps to read


def looks_like_sitemap(data: bytes) -> bool:
    head = data[:2048].lstrip()
    return head.startswith(b"<?xml") and (b"<urlset" in data[:4096] or b"<sitemapindex" in head)


def sitemap_entries(data: bytes, url: str) -> SitemapEntries:
    """The ``<loc>`` entries of a sitemap (or sitemap index); raises ValueError for XML
    that is not one. Entries on another site than the sitemap's are dropped."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise ValueError(f"{url}: not a valid sitemap: {e}") from None
    kind = root.tag.rsplit("}", 1)[-1]
    if kind not in ("urlset", "sitemapindex"):
        raise ValueError(f"{url}: not a sitemap (root element <{kind}>)")
    locs = [
        normalize((el.text or "").strip())
        for el in root.iter()
        if el.tag.rsplit("}", 1)[-1] == "loc" and (el.text or "").strip()
    ]
    own = [u for u in locs if origin(u) == origin(url)]
    if kind == "urlset":
        return SitemapEntries(tuple(dict.fromkeys(own)), ())
    return SitemapEntries((), tuple(dict.fromkeys(own)))
