"""Image files (``.png``, ``.jpg``, ``.tiff``…) → :class:`ParsedDocument` by OCR.

Each frame of the image (a multi-page TIFF has several) is one page, numbered
like a PDF page, its text read by Tesseract (:mod:`ragline.ingest.parse.ocr`).
"""

from __future__ import annotations

import io
from typing import Any

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.build import missing_extra
from ragline.ingest.parse.ocr import Ocr, OcrOptions, OcrUnavailable
from ragline.ingest.parse.pdf import page_document
from ragline.types import ParsedDocument


def parse_image(data: bytes, source: str, options: OcrOptions | None) -> ParsedDocument:
    """Raises :class:`IngestError` for an unreadable image, or when OCR is off or cannot run."""
    if options is None:
        raise IngestError(source, None, "image files are read by OCR, which is off (RAGLINE_OCR)")
    try:
        from PIL import Image, ImageSequence
    except ImportError as exc:
        raise missing_extra(source, "image", "ocr", exc) from exc
    try:
        ocr = Ocr(options)
    except OcrUnavailable as exc:
        raise IngestError(source, None, f"cannot OCR this image: {exc}", environment=True) from exc
    pages: list[str] = []
    languages: set[str] = set()
    try:
        with Image.open(io.BytesIO(data)) as image:
            for frame in ImageSequence.Iterator(image):
                text, used = ocr.read(frame.copy())
                pages.append(text)
                languages.add(used)
    except OcrUnavailable as exc:
        raise IngestError(source, None, f"OCR failed: {exc}", environment=True) from exc
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise IngestError(source, None, f"unreadable image: {exc}") from exc
    metadata: dict[str, Any] = {
        "pages": len(pages),
        "ocr_pages": list(range(1, len(pages) + 1)),
        "ocr_languages": "+".join(sorted(languages)),
    }
    doc = page_document(pages, source, metadata, "image")
    if not doc.blocks:
        raise IngestError(source, None, "OCR found no text in this image")
    return doc
