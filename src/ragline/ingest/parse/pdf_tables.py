"""Ruled tables of a PDF's text layer, rebuilt as pipe tables with pdfplumber.

A text layer lists a table's cells one after another, which reads as a column
of words; pdfplumber finds the table from its ruling lines and gives its rows
back. Only pages whose content stream draws lines or rectangles are looked at
(pdfplumber lays a page out about 20 times slower than pypdf extracts it), and
a page with a table is read as bands: the text above each table, the table,
the text below. Without pdfplumber (the ``pdf`` extra) pages keep their plain
text layer.
"""

from __future__ import annotations

import io
import re
from typing import Any

from ragline.ingest.parse.build import pipe_table
from ragline.types import BlockKind

#: ``x y w h re`` (rectangle) or ``x y l`` (line to): the paths ruled tables are drawn with.
_PATH_OPS = re.compile(rb"[\d.]\s+(?:re|l)\s")

PagePart = tuple[BlockKind, str]


def draws_paths(content: bytes) -> bool:
    """Whether a page content stream draws rectangles or lines (a table's rules)."""
    return _PATH_OPS.search(content) is not None


def table_pages(data: bytes, numbers: list[int]) -> dict[int, list[PagePart]]:
    """For each of the given 1-based pages that holds a table of at least two rows
    and two columns: its text and tables in reading order (top to bottom)."""
    if not numbers:
        return {}
    try:
        import pdfplumber
    except ImportError:
        return {}
    out: dict[int, list[PagePart]] = {}
    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for number in numbers:
            page = pdf.pages[number - 1]
            try:
                parts = _page_parts(page)
            finally:
                page.close()
            if parts:
                out[number] = parts
    return out


def _page_parts(page: Any) -> list[PagePart]:
    tables = []
    for table in page.find_tables():
        rows = [[cell or "" for cell in row] for row in table.extract()]
        if len(rows) >= 2 and max(len(r) for r in rows) >= 2:
            tables.append((table.bbox, rows))
    if not tables:
        return []
    x0, top, x1, bottom = page.bbox
    parts: list[PagePart] = []
    pos = top
    for (_, t_top, _, t_bottom), rows in sorted(tables, key=lambda t: t[0][1]):
        if t_top > pos:
            parts.append((BlockKind.PAGE, _band(page, x0, pos, x1, t_top)))
        parts.append((BlockKind.TABLE, pipe_table(rows)))
        pos = max(pos, min(t_bottom, bottom))
    if bottom > pos:
        parts.append((BlockKind.PAGE, _band(page, x0, pos, x1, bottom)))
    return [(kind, text) for kind, text in parts if text.strip()]


def _band(page: Any, x0: float, top: float, x1: float, bottom: float) -> str:
    return str(page.crop((x0, top, x1, bottom)).extract_text() or "")
