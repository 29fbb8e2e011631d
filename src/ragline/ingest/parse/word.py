"""Word ``.docx`` → :class:`ParsedDocument` with python-docx.

Heading styles ("Heading 1"…, "Title") open sections, so chunks carry the heading
path; tables become pipe tables; list paragraphs (numbered or in a "List" style)
are gathered into one list block, indented by their level. A ``.docx`` has no
pages until a word processor lays it out, so its chunks have no page number.
"""

from __future__ import annotations

import io
import re
from pathlib import PurePath
from typing import Any

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.build import BodyBuilder, collapse, missing_extra
from ragline.types import BlockKind, ParsedDocument

_HEADING_STYLE = re.compile(r"heading\s*(\d)", re.IGNORECASE)
_PROPERTIES = ("author", "subject", "keywords", "category")


def parse_docx(data: bytes, source: str) -> ParsedDocument:
    """Raises :class:`IngestError` for a file that is not a readable ``.docx``."""
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph
    except ImportError as exc:
        raise missing_extra(source, ".docx", "office", exc) from exc
    try:
        document = docx.Document(io.BytesIO(data))
        items = list(document.iter_inner_content())
        props = document.core_properties
        meta_title = collapse(props.title or "")
        metadata: dict[str, Any] = {
            name: value for name in _PROPERTIES if (value := collapse(getattr(props, name) or ""))
        }
        builder = BodyBuilder()
        first_heading = ""
        list_lines: list[str] = []
        numbers: dict[int, int] = {}
        for item in items:
            if isinstance(item, Paragraph):
                marker = _list_marker(item, numbers)
                if marker is not None:
                    text = collapse(item.text)
                    if text:
                        list_lines.append(f"{marker} {text}")
                    continue
            if list_lines:
                builder.add(BlockKind.LIST, "\n".join(list_lines))
                list_lines, numbers = [], {}
            if isinstance(item, Table):
                builder.table([[cell.text for cell in row.cells] for row in item.rows])
                continue
            level = _heading_level(item)
            if level:
                builder.heading(item.text, level)
                first_heading = first_heading or collapse(item.text)
            else:
                builder.add(BlockKind.PARAGRAPH, item.text.strip())
        if list_lines:
            builder.add(BlockKind.LIST, "\n".join(list_lines))
    except IngestError:
        raise
    except Exception as exc:  # python-docx/lxml/zipfile raise many types for a bad file
        raise IngestError(source, None, f"corrupt .docx file: {exc}") from exc
    return ParsedDocument(
        source=source,
        title=meta_title or first_heading or PurePath(source).stem,
        body=builder.body,
        blocks=tuple(builder.blocks),
        metadata=metadata,
        format="docx",
    )


def _style_name(paragraph: Any) -> str:
    style = paragraph.style
    return str(style.name or "") if style is not None else ""


def _heading_level(paragraph: Any) -> int:
    """1–6 for a heading paragraph ("Title" counts as level 1), else 0."""
    name = _style_name(paragraph)
    if name.lower() == "title":
        return 1
    m = _HEADING_STYLE.match(name)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else 0


def _list_marker(paragraph: Any, numbers: dict[int, int]) -> str | None:
    """The ``-`` or ``n.`` marker (indented by list level) of a list paragraph,
    or None for any other paragraph. Numbering restarts below a shallower item."""
    name = _style_name(paragraph).lower()
    ppr = paragraph._p.pPr
    numpr = ppr.numPr if ppr is not None else None
    if numpr is None and not name.startswith("list"):
        return None
    level = 0
    if numpr is not None and numpr.ilvl is not None:
        level = int(numpr.ilvl.val)
    elif (m := re.search(r"(\d)$", name)) is not None:
        level = int(m.group(1)) - 1
    for deeper in [k for k in numbers if k > level]:
        del numbers[deeper]
    indent = "  " * max(level, 0)
    if "number" in name:
        numbers[level] = numbers.get(level, 0) + 1
        return f"{indent}{numbers[level]}."
    return f"{indent}-"
