"""PDF → :class:`ParsedDocument`: the text layer, one PAGE block per page.

Pages are the only structure a PDF reliably has; keeping them as blocks lets
every chunk say which page it came from. A page without a text layer (a scan)
is rendered and read by OCR (:mod:`ragline.ingest.parse.ocr`); a scan that
cannot be OCRed fails loudly instead of indexing nothing.
"""

from __future__ import annotations

import io
from pathlib import PurePath
from typing import Any

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.ocr import Ocr, OcrOptions, OcrUnavailable, render_pdf_pages
from ragline.ingest.parse.pdf_tables import draws_paths, table_pages
from ragline.ingest.parse.text import MAX_TITLE_CHARS
from ragline.types import Block, BlockKind, ParsedDocument

_INFO_FIELDS = {"/Author": "author", "/Subject": "subject", "/Creator": "creator"}
#: Values producers write when a field is unset (reportlab: "untitled", "anonymous").
_PLACEHOLDERS = frozenset({"untitled", "untitled document", "anonymous", "unspecified", "unknown"})


def parse_pdf(
    data: bytes,
    source: str,
    ocr: OcrOptions | None = None,
    *,
    tables: bool = True,
    max_pages: int | None = None,
) -> ParsedDocument:
    """Extract each page's text, OCR the pages that have none (with ``ocr``),
    rebuild ruled tables as tables (with ``tables``, where pdfplumber is installed);
    raises :class:`IngestError` for encrypted or corrupt PDFs, for scans
    that cannot be OCRed, and for more pages than ``max_pages`` (counted from the
    page tree before any page is read: a small file can hold 100,000 pages)."""
    if b"%PDF-" not in data[:1024]:
        raise IngestError(source, None, "not a PDF file (no %PDF- header in the first 1 KiB)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(source, None, "encrypted PDF: a password is needed to read it")
        count = len(reader.pages)
        if max_pages is not None and count > max_pages:
            raise IngestError(
                source,
                None,
                f"PDF has {count:,} pages, over the limit of {max_pages:,} (RAGLINE_MAX_PDF_PAGES)",
            )
        pages = [_page_text(page.extract_text()) for page in reader.pages]
        info = reader.metadata
        ruled = [
            n
            for n, page in enumerate(reader.pages, start=1)
            if tables and pages[n - 1] and draws_paths(_content(page))
        ]
    except IngestError:
        raise
    except (FileNotDecryptedError, DependencyError) as exc:
        raise IngestError(source, None, f"encrypted PDF: cannot decrypt ({exc})") from exc
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise IngestError(source, None, f"corrupt PDF: {exc}") from exc
    except RecursionError as exc:
        raise IngestError(source, None, "corrupt PDF: object graph is cyclic") from exc

    metadata: dict[str, Any] = {"pages": len(pages)}
    blank = [n for n, text in enumerate(pages, start=1) if not text]
    if blank:
        _ocr_pages(data, source, pages, blank, ocr, metadata)
    meta_title = ""
    if info is not None:
        meta_title = _info_value(info.get("/Title"))
        for key, name in _INFO_FIELDS.items():
            if value := _info_value(info.get(key)):
                metadata[name] = value
    try:
        with_tables = table_pages(data, ruled)
    except Exception as exc:  # pdfminer raises its own errors for odd pages
        raise IngestError(source, None, f"corrupt PDF (reading its tables): {exc}") from exc
    if with_tables:
        metadata["table_pages"] = sorted(with_tables)
    return page_document(pages, source, metadata, "pdf", title=meta_title, parts=with_tables)


def page_document(
    pages: list[str],
    source: str,
    metadata: dict[str, Any],
    fmt: str,
    *,
    title: str = "",
    parts: dict[int, list[tuple[BlockKind, str]]] | None = None,
) -> ParsedDocument:
    """One PAGE block per page with text (1-based page numbers), blank lines
    between; a page in ``parts`` is its text bands and TABLE blocks instead."""
    texts: list[str] = []
    blocks: list[Block] = []
    pos = 0
    for number, raw in enumerate(pages, start=1):
        for kind, part in (parts or {}).get(number, [(BlockKind.PAGE, raw)]):
            text = _page_text(part)
            if not text:
                continue
            if texts:
                texts.append("\n\n")
                pos += 2
            blocks.append(Block(kind, pos, pos + len(text), (), page=number))
            texts.append(text)
            pos += len(text)
    body = "".join(texts)
    return ParsedDocument(
        source=source,
        title=title or _first_line_title(body, source),
        body=body,
        blocks=tuple(blocks),
        metadata=metadata,
        format=fmt,
    )


def _ocr_pages(
    data: bytes,
    source: str,
    pages: list[str],
    blank: list[int],
    ocr: OcrOptions | None,
    metadata: dict[str, Any],
) -> None:
    """Fill ``pages`` (in place) with OCR text for the ``blank`` ones (no text layer).

    When OCR is off or cannot run, a PDF with no text at all fails with the
    reason; one with some text keeps it and lists the unread pages in its metadata.
    """
    scanned = len(blank) == len(pages)
    unavailable = False
    if ocr is None:
        reason = "OCR is off (RAGLINE_OCR=false)"
    else:
        try:
            reader = Ocr(ocr)
            languages: set[str] = set()
            for number, image in render_pdf_pages(data, blank, ocr.dpi):
                pages[number - 1], used = reader.read(image)
                languages.add(used)
        except OcrUnavailable as exc:
            reason, unavailable = str(exc), True
        except Exception as exc:  # pdfium raises its own errors for a page it cannot render
            raise IngestError(source, None, f"cannot render PDF page for OCR: {exc}") from exc
        else:
            metadata["ocr_pages"] = blank
            metadata["ocr_languages"] = "+".join(sorted(languages))
            return
    if scanned:
        raise IngestError(
            source,
            None,
            f"PDF has no text layer on any of its {len(pages)} pages "
            f"(a scan or images only) and it cannot be OCRed: {reason}",
            environment=unavailable,
        )
    metadata["pages_without_text"] = blank
    metadata["ocr_error"] = reason


def _content(page: Any) -> bytes:
    """A page's content stream, b"" when it has none or it cannot be read."""
    try:
        contents = page.get_contents()
        return bytes(contents.get_data()) if contents is not None else b""
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError):
        return b""


def _info_value(value: object) -> str:
    text = str(value or "").strip()
    return "" if text.lower() in _PLACEHOLDERS else text


def _page_text(text: str) -> str:
    """Normalised newlines, no NULs, no trailing spaces: clean spans to cut from."""
    text = text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def _first_line_title(body: str, source: str) -> str:
    first = body.split("\n", 1)[0].strip()
    return first if 0 < len(first) < MAX_TITLE_CHARS else PurePath(source).stem
