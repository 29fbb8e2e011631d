"""Web pages in: one page, a sitemap, or a same-site crawl (see :mod:`.crawl`)."""

from __future__ import annotations

from ragline.ingest.web.cache import PageCache
from ragline.ingest.web.ingest import ingest_web
from ragline.ingest.web.urls import is_url

__all__ = ["PageCache", "ingest_web", "is_url"]
