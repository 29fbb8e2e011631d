"""Spreadsheets (``.xlsx`` with openpyxl, ``.csv`` with the standard library) →
:class:`ParsedDocument`.

A sheet is a section titled by its name and numbered like a page (its place in
the workbook), its rows one pipe table whose first
non-empty row is the header: the section chunker keeps a table whole when it
fits and otherwise cuts it between rows, repeating the header in every part,
so each chunk still says what its columns mean. Cells hold the values last
computed (formulas are not evaluated); empty trailing rows and columns go.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable, Sequence
from typing import Any

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.build import BodyBuilder, collapse, missing_extra
from ragline.ingest.parse.limits import ParseLimits, check_cells
from ragline.types import ParsedDocument


def parse_xlsx(data: bytes, source: str, limits: ParseLimits | None = None) -> ParsedDocument:
    """Raises :class:`IngestError` for a file that is not a readable ``.xlsx``, or
    whose sheets hold more cells than ``limits.max_sheet_cells``.

    The sheet's declared ``<dimension>`` is ignored (``reset_dimensions``): a
    workbook of a few hundred bytes can declare A1:XFD1048576, and openpyxl would
    pad every row to it; only the cells present are read, and counted as they come.
    """
    limits = limits or ParseLimits()
    try:
        import openpyxl
    except ImportError as exc:
        raise missing_extra(source, ".xlsx", "office", exc) from exc
    try:
        book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            sheets = []
            for ws in book.worksheets:
                reset = getattr(ws, "reset_dimensions", None)  # chart sheets have none
                if reset is None:
                    continue
                reset()
                what = f"sheet {ws.title!r}"
                sheets.append(
                    (ws.title, _trim(ws.iter_rows(values_only=True), source, what, limits))
                )
            meta_title = collapse(book.properties.title or "")
        finally:
            book.close()
    except IngestError:
        raise
    except Exception as exc:  # openpyxl/zipfile/lxml raise many types for a bad file
        raise IngestError(source, None, f"corrupt .xlsx file: {exc}") from exc
    builder = BodyBuilder()
    for number, (name, rows) in enumerate(sheets, start=1):
        if rows:
            builder.page = number  # like a slide: cited by number, never merged with another
            builder.reset_path()
            builder.heading(name, 1)
            builder.table(rows)
    metadata: dict[str, Any] = {"sheets": [name for name, _ in sheets]}
    return builder.document(source, meta_title, "xlsx", metadata)


def parse_csv(text: str, source: str, limits: ParseLimits | None = None) -> ParsedDocument:
    """Comma, semicolon, tab or pipe separated (sniffed from the first lines);
    raises :class:`IngestError` with the line of a malformed row, or for more
    cells than ``limits.max_sheet_cells``."""
    limits = limits or ParseLimits()
    sample = text[:8192]
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, ",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text, newline=""), dialect, strict=True)
    try:
        rows = _trim(reader, source, "CSV file", limits)
    except csv.Error as exc:
        raise IngestError(source, reader.line_num, f"malformed CSV: {exc}") from exc
    builder = BodyBuilder()
    builder.table(rows)
    return builder.document(source, "", "csv", {"rows": max(len(rows) - 1, 0)})


def cell_text(value: object) -> str:
    """A cell as text: whole floats without ``.0``, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _trim(
    rows: Iterable[Sequence[object]], source: str, what: str, limits: ParseLimits
) -> list[list[str]]:
    """Rows as text, without blank rows or the empty columns on the right.

    Cells are counted as they are read (a blank row counts as one) and again as
    the padded table they become (rows × widest row), so neither a huge sheet
    nor one very wide row among many short ones can exhaust memory."""
    out: list[list[str]] = []
    cells = 0
    for row in rows:
        cells += max(len(row), 1)
        check_cells(source, what, cells, limits)
        texts = [cell_text(v) for v in row]
        if any(c.strip() for c in texts):
            out.append(texts)
    width = max(
        (max(i for i, c in enumerate(row) if c.strip()) + 1 for row in out),
        default=0,
    )
    check_cells(source, what, len(out) * width, limits)
    return [row[:width] for row in out]
