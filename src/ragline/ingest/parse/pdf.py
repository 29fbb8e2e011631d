"""PDF → :class:`ParsedDocument`: the text layer, one PAGE block per page.

Pages are the only structure a PDF reliably has; keeping them as blocks lets
every chunk say which page it came from. A PDF without a text layer (a scan)
fails loudly instead of indexing nothing.
"""

from __future__ import annotations

import io
from pathlib import PurePath
from typing import Any

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.text import MAX_TITLE_CHARS
from ragline.types import Block, BlockKind, ParsedDocument

_INFO_FIELDS = {"/Author": "author", "/Subject": "subject", "/Creator": "creator"}
#: Values producers write when a field is unset (reportlab: "untitled", "anonymous").
_PLACEHOLDERS = frozenset({"untitled", "untitled document", "anonymous", "unspecified", "unknown"})


def parse_pdf(data: bytes, source: str) -> ParsedDocument:
    """Extract each page's text; raises :class:`IngestError` for encrypted,
    corrupt or image-only PDFs."""
    if b"%PDF-" not in data[:1024]:
        raise IngestError(source, None, "not a PDF file (no %PDF- header in the first 1 KiB)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(source, None, "encrypted PDF: a password is needed to read it")
        pages = [_page_text(page.extract_text()) for page in reader.pages]
        info = reader.metadata
    except IngestError:
        raise
    except (FileNotDecryptedError, DependencyError) as exc:
        raise IngestError(source, None, f"encrypted PDF: cannot decrypt ({exc})") from exc
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise IngestError(source, None, f"corrupt PDF: {exc}") from exc
    except RecursionError as exc:
        raise IngestError(source, None, "corrupt PDF: object graph is cyclic") from exc

    parts: list[str] = []
    blocks: list[Block] = []
    pos = 0
    for number, text in enumerate(pages, start=1):
        if not text:
            continue
        if parts:
            parts.append("\n\n")
            pos += 2
        blocks.append(Block(BlockKind.PAGE, pos, pos + len(text), (), page=number))
        parts.append(text)
        pos += len(text)
    if not blocks:
        raise IngestError(
            source,
            None,
            f"PDF has no text layer on any of its {len(pages)} pages "
            "(a scan or images only); run OCR on it first",
        )
    body = "".join(parts)
    metadata: dict[str, Any] = {"pages": len(pages)}
    meta_title = ""
    if info is not None:
        meta_title = _info_value(info.get("/Title"))
        for key, name in _INFO_FIELDS.items():
            if value := _info_value(info.get(key)):
                metadata[name] = value
    return ParsedDocument(
        source=source,
        title=meta_title or _first_line_title(body, source),
        body=body,
        blocks=tuple(blocks),
        metadata=metadata,
        format="pdf",
    )


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
