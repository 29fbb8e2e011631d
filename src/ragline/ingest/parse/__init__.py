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
from ragline.ingest.parse.html import parse_html
from ragline.ingest.parse.markdown import parse_markdown
from ragline.ingest.parse.pdf import parse_pdf
from ragline.ingest.parse.text import parse_text
from ragline.types import ParsedDocument

TextParser = Callable[[str, str], ParsedDocument]

_TEXT_PARSERS: dict[str, TextParser] = {
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".txt": parse_text,
    ".text": parse_text,
    ".html": parse_html,
    ".htm": parse_html,
}

#: Lower-case file suffixes :func:`parse_file` understands.
SUPPORTED_SUFFIXES: frozenset[str] = frozenset({*_TEXT_PARSERS, ".pdf"})

_BOM = b"\xef\xbb\xbf"
#: Largest document metadata (front matter as JSON), see RAGLINE_MAX_METADATA_BYTES.
DEFAULT_MAX_METADATA_BYTES = 64 * 1024

__all__ = [
    "SUPPORTED_SUFFIXES",
    "IngestError",
    "parse_file",
    "parse_html",
    "parse_markdown",
    "parse_pdf",
    "parse_text",
]


def parse_file(
    path: Path,
    data: bytes,
    *,
    max_bytes: int,
    default_title: str | None = None,
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES,
) -> ParsedDocument:
    """Parse ``data`` (the content of ``path``) by the file's suffix.

    A document with no title of its own (no front matter title, H1, ``<title>`` or
    first line) is titled ``default_title`` when one is given, else the file's stem:
    an upload stored under a content hash keeps its client's name as its title.

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
    if suffix == ".pdf":
        doc = parse_pdf(data, source)
    else:
        doc = _TEXT_PARSERS[suffix](_decode(data, source, suffix), source)
    if not doc.blocks:
        raise IngestError(source, None, f"no text to index in this {doc.format} file")
    meta_bytes = len(json.dumps(doc.metadata, default=str, ensure_ascii=False).encode())
    if meta_bytes > max_metadata_bytes:
        raise IngestError(
            source,
            1,
            f"metadata (front matter) is {meta_bytes:,} bytes as JSON, over the limit of "
            f"{max_metadata_bytes:,} (RAGLINE_MAX_METADATA_BYTES); it is copied onto every chunk",
        )
    if default_title and doc.title == path.stem:  # every parser's last resort
        doc = replace(doc, title=default_title)
    return doc


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
