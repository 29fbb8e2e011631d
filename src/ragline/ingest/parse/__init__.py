"""Files → :class:`~ragline.types.ParsedDocument`, one parser per format.

:func:`parse_file` does the checks every format shares (size, emptiness,
binary content, UTF-8), so each parser only deals with its own syntax.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.ebook import parse_epub
from ragline.ingest.parse.html import parse_html
from ragline.ingest.parse.image import parse_image
from ragline.ingest.parse.limits import ParseLimits, check_archive, check_lines, check_tags
from ragline.ingest.parse.markdown import parse_markdown
from ragline.ingest.parse.ocr import OcrOptions
from ragline.ingest.parse.pdf import parse_pdf
from ragline.ingest.parse.sheets import parse_csv, parse_xlsx
from ragline.ingest.parse.slides import parse_pptx
from ragline.ingest.parse.text import parse_text
from ragline.ingest.parse.word import parse_docx, parse_odt
from ragline.types import ParsedDocument

TextParser = Callable[[str, str], ParsedDocument]
BinaryParser = Callable[[bytes, str], ParsedDocument]

_TEXT_PARSERS: dict[str, TextParser] = {
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".txt": parse_text,
    ".text": parse_text,
    ".html": parse_html,
    ".htm": parse_html,
    ".csv": parse_csv,
}

_BINARY_PARSERS: dict[str, BinaryParser] = {
    ".docx": parse_docx,
    ".pptx": parse_pptx,
    ".xlsx": parse_xlsx,
    ".epub": parse_epub,
    ".odt": parse_odt,
}

#: Image files, read by OCR.
IMAGE_SUFFIXES: frozenset[str] = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff"})

#: Lower-case file suffixes :func:`parse_file` understands.
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(
    {*_TEXT_PARSERS, *_BINARY_PARSERS, *IMAGE_SUFFIXES, ".pdf"}
)

_BOM = b"\xef\xbb\xbf"
#: Largest document metadata (front matter as JSON), see RAGLINE_MAX_METADATA_BYTES.
DEFAULT_MAX_METADATA_BYTES = 64 * 1024

__all__ = [
    "DEFAULT_MAX_METADATA_BYTES",
    "IMAGE_SUFFIXES",
    "SUPPORTED_SUFFIXES",
    "IngestError",
    "OcrOptions",
    "ParseLimits",
    "check_metadata_size",
    "parse_csv",
    "parse_docx",
    "parse_epub",
    "parse_file",
    "parse_html",
    "parse_image",
    "parse_markdown",
    "parse_odt",
    "parse_pdf",
    "parse_pptx",
    "parse_text",
    "parse_xlsx",
]


def parse_file(
    path: Path,
    data: bytes,
    *,
    max_bytes: int,
    default_title: str | None = None,
    ocr: OcrOptions | None = None,
    pdf_tables: bool = True,
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES,
    limits: ParseLimits | None = None,
) -> ParsedDocument:
    """Parse ``data`` (the content of ``path``) by the file's suffix.

    A document with no title of its own (no front matter title, H1, ``<title>`` or
    first line) is titled ``default_title`` when one is given, else the file's stem:
    an upload stored under a content hash keeps its client's name as its title.
    ``ocr`` (None: OCR off) reads PDF pages without a text layer and image files;
    ``pdf_tables`` rebuilds ruled PDF tables as tables. ``limits`` bound the work
    a small file can cause (zip bombs, huge declared sheets); see
    :mod:`ragline.ingest.parse.limits`.

    Raises :class:`IngestError` naming the file (and line, where there is one)
    for files that are too large, empty, binary, not UTF-8, malformed, or that
    hold no text to index.
    """
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        reason = f"unsupported file type {suffix!r} (supported: {supported})"
        raise IngestError(source, None, reason)
    if len(data) > max_bytes:
        raise IngestError(
            source,
            None,
            f"file is {len(data):,} bytes, over the limit of {max_bytes:,} bytes "
            "(raise RAGLINE_MAX_FILE_BYTES to ingest it)",
        )
    if not data.strip():
        raise IngestError(source, None, "file is empty (or whitespace only)")
    limits = limits or ParseLimits()
    if suffix in _BINARY_PARSERS:  # all zip archives: refuse a bomb before any parser opens it
        check_archive(data, source, limits)
    if suffix == ".pdf":
        doc = parse_pdf(data, source, ocr, tables=pdf_tables, max_pages=limits.max_pdf_pages)
    elif suffix in IMAGE_SUFFIXES:
        doc = parse_image(data, source, ocr)
    elif suffix == ".xlsx":
        doc = parse_xlsx(data, source, limits)
    elif suffix in _BINARY_PARSERS:
        doc = _BINARY_PARSERS[suffix](data, source)
    elif suffix == ".csv":
        doc = parse_csv(_decode(data, source, suffix), source, limits)
    elif suffix in (".md", ".markdown"):
        text = _decode(data, source, suffix)
        check_lines(source, text, limits)
        doc = parse_markdown(text, source)
    elif suffix in (".html", ".htm"):
        text = _decode(data, source, suffix)
        check_tags(source, text, limits)
        try:
            doc = parse_html(text, source)
        except RecursionError as exc:  # a parser walks the tree recursively
            raise IngestError(source, None, "HTML nested too deeply to parse") from exc
    else:
        doc = _TEXT_PARSERS[suffix](_decode(data, source, suffix), source)
    if not doc.blocks:
        raise IngestError(source, None, f"no text to index in this {doc.format} file")
    check_metadata_size(doc, max_metadata_bytes)
    if default_title and doc.title == path.stem:  # every parser's last resort
        doc = replace(doc, title=default_title)
    return doc


def check_metadata_size(doc: ParsedDocument, max_metadata_bytes: int) -> None:
    """Refuse a document whose metadata (front matter) is over the cap: it is copied
    onto every chunk, so a large one multiplies (files and web pages alike)."""
    meta_bytes = len(json.dumps(doc.metadata, default=str, ensure_ascii=False).encode())
    if meta_bytes > max_metadata_bytes:
        raise IngestError(
            doc.source,
            1,
            f"metadata (front matter) is {meta_bytes:,} bytes as JSON, over the limit of "
            f"{max_metadata_bytes:,} (RAGLINE_MAX_METADATA_BYTES); it is copied onto every chunk",
        )


def _decode(data: bytes, source: str, suffix: str) -> str:
    """Strict UTF-8 (BOM stripped); the error says on which line the bad byte is."""
    nul = data.find(b"\x00")
    if nul != -1:
        line = data.count(b"\n", 0, nul) + 1
        raise IngestError(source, line, f"binary file named {suffix} (NUL byte at offset {nul})")
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise IngestError(
            source,
            line,
            f"not valid UTF-8: byte 0x{data[exc.start]:02x} at column {column} "
            "(save the file as UTF-8)",
        ) from exc
    if not text.strip():
        raise IngestError(source, None, "file is empty (or whitespace only)")
    return text
