"""`ragline ingest https://…`: crawl, then sync the pages like files.

The crawl (:mod:`.crawl`) decides what to fetch; the pages are handed to
:meth:`Indexer.sync_documents <ragline.ingest.sync.Indexer.sync_documents>`,
which skips a page whose content hash matches its record, reuses the vectors of
unchanged chunks and deletes the documents of pages that are gone. What each
page answered (validators, canonical URL, links) is kept in :class:`PageCache`
for the next crawl's conditional GETs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

from ragline.ingest.errors import IngestError
from ragline.ingest.parse import (
    DEFAULT_MAX_METADATA_BYTES,
    OcrOptions,
    check_metadata_size,
    parse_html,
    parse_markdown,
    parse_pdf,
    parse_text,
)
from ragline.ingest.plan import SourcedDocument
from ragline.ingest.prepare import ocr_options
from ragline.ingest.progress import ProgressCallback
from ragline.ingest.report import FileFailure, IngestReport
from ragline.ingest.sync import Indexer
from ragline.ingest.web.cache import CachedPage, PageCache
from ragline.ingest.web.crawl import HTML_TYPES, CrawledPage, crawl
from ragline.ingest.web.fetch import Fetcher
from ragline.ingest.web.pace import PacedFetcher
from ragline.ingest.web.robots import Robots
from ragline.ingest.web.urls import chapter_of_url
from ragline.types import ParsedDocument

_TEXT_TYPES = {"text/markdown": parse_markdown, "text/x-markdown": parse_markdown}


def page_parser(
    page: CrawledPage,
    *,
    ocr: OcrOptions | None = None,
    pdf_tables: bool = True,
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES,
) -> Callable[[], ParsedDocument]:
    """How to parse a fetched page, by its media type (the URL's suffix when the
    server sends none or a generic one), with the options files get (OCR, PDF
    tables, the metadata cap)."""
    media = page.result.content_type
    suffix = PurePosixPath(page.url.split("?", 1)[0]).suffix.lower()
    if media in ("", "application/octet-stream", "text/plain"):
        media = {
            ".md": "text/markdown",
            ".markdown": "text/markdown",
            ".pdf": "application/pdf",
        }.get(suffix, media or "text/html")

    def parse() -> ParsedDocument:
        if not page.result.data.strip():
            raise IngestError(page.source, None, "page is empty")
        if media in HTML_TYPES:
            doc = parse_html(page.result.text(), page.source)
        elif media in _TEXT_TYPES:
            doc = _TEXT_TYPES[media](page.result.text(), page.source)
        elif media == "text/plain":
            doc = parse_text(page.result.text(), page.source)
        elif media == "application/pdf":
            doc = parse_pdf(page.result.data, page.source, ocr, tables=pdf_tables)
        else:
            raise IngestError(page.source, None, f"unsupported content type {media!r}")
        if not doc.blocks:
            raise IngestError(page.source, None, f"no text to index in this {doc.format} page")
        check_metadata_size(doc, max_metadata_bytes)
        return doc

    return parse


def ingest_web(
    indexer: Indexer,
    cache: PageCache,
    start: str,
    *,
    tenant: str,
    max_pages: int,
    max_depth: int,
    progress: ProgressCallback | None = None,
) -> IngestReport:
    """Crawl ``start`` and bring the tenant's documents under its scope in line."""
    settings = indexer.settings
    indexed = {r.source: r for r in indexer.store.documents(tenant)}

    def known(url: str) -> CachedPage | None:
        """The cached page, only while the index still holds what it describes."""
        page = cache.get(tenant, url)
        if page is None:
            return None
        rec = indexed.get(page.source)
        return page if rec is not None and rec.file_hash == page.content_hash else None

    fetcher = Fetcher(
        user_agent=settings.web_user_agent,
        timeout_s=settings.web_timeout_s,
        max_bytes=settings.max_file_bytes,
    )
    try:
        robots = Robots(fetcher.status_and_text, settings.web_user_agent)
        paced = PacedFetcher(fetcher, robots.delay, settings.web_max_crawl_delay_s)
        found = crawl(start, paced, robots, known, max_pages=max_pages, max_depth=max_depth)
    finally:
        fetcher.close()
    docs = [
        SourcedDocument(
            source=p.source,
            content_hash=p.content_hash,
            size=len(p.result.data),
            parse=page_parser(
                p,
                ocr=ocr_options(settings),
                pdf_tables=settings.pdf_tables,
                max_metadata_bytes=settings.max_metadata_bytes,
            ),
            chapter=chapter_of_url(p.source, found.scope),
        )
        for p in found.pages
    ]
    failed = [FileFailure(url, f"cannot fetch: {reason}") for url, reason in found.failed]
    # A page that failed this time keeps its document, under its canonical URL too.
    keep = [c.source for url, _ in found.failed if (c := cache.get(tenant, url)) is not None]
    report = indexer.sync_documents(
        docs,
        root=found.scope,
        tenant=tenant,
        unchanged=[p.source for p in found.unchanged],
        keep=keep,
        delete_missing=found.complete,
        failed=failed,
        progress=progress,
    )
    bad = {f.path for f in report.failed}
    for p in found.pages:
        if p.source not in bad:
            entry = CachedPage(p.url, p.source, p.result.validators, p.content_hash, p.links)
            cache.put(tenant, entry)
    for url in found.gone:
        cache.forget(tenant, url)
    report.crawl = {
        "start": found.start,
        "mode": found.mode,
        "scope": found.scope,
        "fetched": len(found.pages),
        "not_modified": len(found.unchanged),
        "gone": len(found.gone),
        "blocked_by_robots": sorted(found.blocked),
        "duplicates": len(found.duplicates),
        "truncated": found.truncated,
        "max_pages": max_pages,
        "max_depth": max_depth,
    }
    return report
