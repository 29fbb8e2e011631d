"""PowerPoint ``.pptx`` → :class:`ParsedDocument` with python-pptx.

A slide is a section titled by its title (``Slide N`` when it has none) and
numbered like a PDF page, so a citation says which slide it came from. Its
shapes are read top to bottom, left to right: text boxes of several
paragraphs become lists (indented by bullet level), tables stay tables, and
the speaker notes follow as a paragraph starting ``Notes:``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.build import BodyBuilder, collapse, missing_extra
from ragline.types import BlockKind, ParsedDocument


def parse_pptx(data: bytes, source: str) -> ParsedDocument:
    """Raises :class:`IngestError` for a file that is not a readable ``.pptx``."""
    try:
        from pptx import Presentation
    except ImportError as exc:
        raise missing_extra(source, ".pptx", "office", exc) from exc
    try:
        deck = Presentation(io.BytesIO(data))
        builder = BodyBuilder()
        first_title = ""
        count = 0
        for number, slide in enumerate(deck.slides, start=1):
            count = number
            builder.page = number
            builder.reset_path()
            title_shape = slide.shapes.title
            title = collapse(title_shape.text_frame.text) if title_shape is not None else ""
            first_title = first_title or title
            builder.heading(title or f"Slide {number}", 1)
            for shape in _reading_order(slide.shapes):
                if title_shape is not None and shape.shape_id == title_shape.shape_id:
                    continue
                _add_shape(builder, shape)
            if slide.has_notes_slide:
                notes = slide.notes_slide.notes_text_frame
                if notes is not None and (text := collapse(notes.text)):
                    builder.add(BlockKind.PARAGRAPH, f"Notes: {text}")
        meta_title = collapse(deck.core_properties.title or "")
    except IngestError:
        raise
    except Exception as exc:  # python-pptx/lxml/zipfile raise many types for a bad file
        raise IngestError(source, None, f"corrupt .pptx file: {exc}") from exc
    metadata: dict[str, Any] = {"slides": count}
    return builder.document(source, meta_title or first_title, "pptx", metadata)


def _reading_order(shapes: Iterable[Any]) -> Iterator[Any]:
    """Shapes sorted top to bottom, then left to right (z-order is not reading order)."""
    return iter(sorted(shapes, key=lambda s: (s.top or 0, s.left or 0)))


def _add_shape(builder: BodyBuilder, shape: Any) -> None:
    if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):
        for inner in _reading_order(shape.shapes):  # a group
            _add_shape(builder, inner)
        return
    if getattr(shape, "has_table", False):
        rows = [[cell.text for cell in row.cells] for row in shape.table.rows]
        builder.table(rows)
        return
    if not getattr(shape, "has_text_frame", False):
        return
    paragraphs = [(p.level, collapse(p.text)) for p in shape.text_frame.paragraphs]
    paragraphs = [(level, text) for level, text in paragraphs if text]
    if len(paragraphs) == 1:
        builder.add(BlockKind.PARAGRAPH, paragraphs[0][1])
    elif paragraphs:
        lines = [f"{'  ' * level}- {text}" for level, text in paragraphs]
        builder.add(BlockKind.LIST, "\n".join(lines))
