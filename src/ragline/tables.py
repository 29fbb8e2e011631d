"""Terminal tables that print every figure whole, at any width and in a pipe.

A rich table that is wider than the terminal squeezes its columns and cuts
their cells (``chun…``, ``23,6…``), figures included. :func:`fit_table` picks
the first layout that fits: the table as given (labels and headers may wrap at
spaces, figures never), the same table turned on its side (one column per row,
for few rows with many figures), or one small two-column table per row.
:func:`pairs_table` lays out one record as label/value lines, which always fits.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


def cell_width(cell: str) -> int:
    """Terminal cells ``cell`` takes once its rich markup is rendered."""
    return Text.from_markup(cell).cell_len


def word_width(cell: str) -> int:
    """The longest word of ``cell``: the narrowest it can wrap to at spaces."""
    return max((cell_width(w) for w in Text.from_markup(cell).plain.split()), default=0)


def needed_width(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Width of a boxed table whose first column wraps at spaces and whose other
    columns (header included: rich does not wrap a no-wrap column's header) stay
    whole: each column plus its padding and border. Counting a figure column's
    header by its longest word let a table of long headers ("peak RSS search")
    pass for fitting, and rich then squeezed its first column away."""
    widths = []
    for i, header in enumerate(headers):
        cells = [row[i] for row in rows]
        if i == 0:
            widths.append(max([word_width(header), *map(word_width, cells)]))
        else:
            widths.append(max([cell_width(header), *map(cell_width, cells)]))
    return sum(widths) + 3 * len(widths) + 1


def _table(title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    t = Table(title=title)
    for i, header in enumerate(headers):
        if i == 0:
            t.add_column(header, overflow="fold")
        else:
            whole = max([cell_width(row[i]) for row in rows], default=0)
            t.add_column(header, justify="right", no_wrap=True, min_width=whole)
    for row in rows:
        t.add_row(*row)
    return t


def fit_table(
    title: str | None, headers: Sequence[str], rows: Sequence[Sequence[str]], width: int
) -> RenderableType:
    """``rows`` (label first, then figures) under ``headers`` in the first layout
    that is at most ``width`` cells wide: as given, turned, or stacked per row."""
    if needed_width(headers, rows) <= width:
        return _table(title, headers, rows)
    turned_headers = [headers[0], *(row[0] for row in rows)]
    turned_rows = [[h, *(row[i] for row in rows)] for i, h in enumerate(headers) if i > 0]
    if needed_width(turned_headers, turned_rows) <= width:
        return _table(title, turned_headers, turned_rows)
    parts: list[RenderableType] = [Text(title, style="italic")] if title else []
    parts += [pairs_table(row[0], list(zip(headers[1:], row[1:], strict=True))) for row in rows]
    return Group(*parts)


def pairs_table(title: str | None, pairs: Sequence[tuple[str, str]]) -> Table:
    """One record as label/value lines: labels wrap, values stay whole."""
    t = Table(title=title, show_header=False)
    t.add_column(overflow="fold")
    whole = max((cell_width(v) for _, v in pairs), default=0)
    t.add_column(justify="right", no_wrap=True, min_width=whole)
    for label, value in pairs:
        t.add_row(label, value)
    return t


def fit_tail(text: str, room: int) -> str:
    """``text`` in at most ``room`` cells, keeping its end (a path's file name);
    nothing when fewer than 8 cells are left."""
    if room < 8:
        return ""
    return text if len(text) <= room else "…" + text[-(room - 1) :]
