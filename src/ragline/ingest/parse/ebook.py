"""EPUB → :class:`ParsedDocument` with ebooklib, each chapter through the HTML parser.

Chapters are read in spine (reading) order; each starts a fresh heading path,
titled by its own first heading, else by its table-of-contents entry, else
``Chapter N``, so every chunk of a book says which chapter it is from.
"""

from __future__ import annotations

import io
import posixpath
from typing import Any

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.build import BodyBuilder, collapse, missing_extra
from ragline.ingest.parse.html import parse_html
from ragline.types import BlockKind, ParsedDocument


def parse_epub(data: bytes, source: str) -> ParsedDocument:
    """Raises :class:`IngestError` for a file that is not a readable EPUB."""
    try:
        import ebooklib
        from ebooklib import epub
    except ImportError as exc:
        raise missing_extra(source, ".epub", "office", exc) from exc
    try:
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
        toc = _toc_titles(book.toc)
        chapters: list[tuple[str, str]] = []
        for idref, _linear in book.spine:
            item = book.get_item_with_id(idref)
            if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
                continue
            if isinstance(item, epub.EpubNav):
                continue
            html = item.get_content().decode("utf-8", errors="replace")
            chapters.append((toc.get(posixpath.normpath(item.get_name()), ""), html))
        title = _dc(book, "title")
        metadata: dict[str, Any] = {}
        if author := _dc(book, "creator"):
            metadata["author"] = author
        if language := _dc(book, "language"):
            metadata["language"] = language
    except IngestError:
        raise
    except Exception as exc:  # ebooklib/zipfile/lxml raise many types for a bad file
        raise IngestError(source, None, f"corrupt .epub file: {exc}") from exc

    builder = BodyBuilder()
    count = 0
    for toc_title, html in chapters:
        chapter = parse_html(html, source)
        if not chapter.blocks:
            continue
        count += 1
        builder.reset_path()
        first = chapter.blocks[0]
        if first.kind is not BlockKind.HEADING:
            builder.heading(toc_title or f"Chapter {count}", 1)
        for block in chapter.blocks:
            text = chapter.body[block.start : block.end]
            if block.kind is BlockKind.HEADING:
                builder.heading(text, block.level)
            else:
                builder.add(block.kind, text)
    metadata["chapters"] = count
    return builder.document(source, title, "epub", metadata)


def _dc(book: Any, name: str) -> str:
    values = book.get_metadata("DC", name)
    return collapse(str(values[0][0])) if values and values[0][0] else ""


def _toc_titles(entries: Any) -> dict[str, str]:
    """File name → title of its first table-of-contents entry (nested ones too)."""
    out: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, tuple | list):
            section, children = entry[0], entry[1]
            _note(out, section)
            for name, title in _toc_titles(children).items():
                out.setdefault(name, title)
        else:
            _note(out, entry)
    return out


def _note(out: dict[str, str], entry: Any) -> None:
    href = getattr(entry, "href", "") or ""
    title = collapse(getattr(entry, "title", "") or "")
    if href and title:
        out.setdefault(posixpath.normpath(href.split("#", 1)[0]), title)
