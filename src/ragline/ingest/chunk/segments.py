"""The pieces a section chunk is built from: segments of blocks (whole, or cut to
fit), the draft chunks they are packed into, and the units that cover the body."""

from __future__ import annotations

from dataclasses import dataclass

from ragline.ingest.chunk.cuts import (
    line_starts,
    opening_fence,
    prose_levels,
    table_rows,
    word_starts,
)
from ragline.ingest.chunk.splitter import Splitter
from ragline.ingest.spans import lstrip_span, rstrip_span
from ragline.types import Block, BlockKind, ParsedDocument

#: Blocks that are never cut (a too-big table is cut only between rows).
ATOMIC_KINDS = frozenset({BlockKind.CODE, BlockKind.MATH, BlockKind.TABLE, BlockKind.HEADING})


@dataclass(slots=True)
class Seg:
    """A piece of one block that goes into a chunk whole.

    A block too big for a chunk starts as one seg with ``levels`` set (where it
    may be cut); packing cuts it into pieces once it knows the room left.
    """

    start: int
    end: int
    kind: BlockKind
    tokens: int
    section: int
    path: tuple[str, ...]
    page: int | None
    atomic: bool
    prefix: str = ""  # repeated table header, for a later part of a split table
    levels: list[list[int]] | None = None  # cut points, for a block still to be split
    table_prefix: str = ""  # the header a split table's later parts repeat


@dataclass(slots=True)
class Draft:
    segs: list[Seg]
    tokens: int
    path: tuple[str, ...]
    overlap_start: int | None = None
    overlap_tokens: int = 0
    merged: bool = False

    @property
    def start(self) -> int:
        return self.segs[0].start if self.overlap_start is None else self.overlap_start

    @property
    def end(self) -> int:
        return self.segs[-1].end


def window_pieces(splitter: Splitter, seg: Seg, budget: int) -> list[Seg]:
    """A block larger than the window, cut into pieces that fit it: at line
    breaks, then spaces, then characters (prose first at blank lines and
    sentences). A later piece of a table repeats its header rows and one of a
    fenced code block its opening fence, so each piece reads as what it is; a
    repeat longer than half the budget is left out."""
    body, start, end = splitter.body, seg.start, seg.end
    prefix, prefix_first = seg.prefix, bool(seg.prefix)
    words = word_starts(body, start, end)
    levels = [line_starts(body, start, end), words]
    if seg.kind is BlockKind.TABLE:
        header, rows = table_rows(body, start, end)
        levels = [rows, words] if rows and not prefix else levels
        prefix = prefix or seg.table_prefix or header
    elif seg.kind is BlockKind.CODE and not prefix:
        prefix = opening_fence(body, start, end)
    elif seg.kind not in ATOMIC_KINDS:
        levels = prose_levels(body, start, end)
    if prefix and splitter.count(prefix) > budget // 2:
        prefix, prefix_first = "", False
    parts = splitter.split(start, end, levels, budget, prefix=prefix, prefix_first=prefix_first)
    return pieces_of(seg, parts)


def pieces_of(seg: Seg, parts: list[tuple[int, int, int, str]]) -> list[Seg]:
    """The pieces a splitter cut ``seg`` into, as segments of its block."""
    return [
        Seg(s, e, seg.kind, t, seg.section, seg.path, seg.page, seg.atomic, p)
        for s, e, t, p in parts
    ]


def draft_text(body: str, d: Draft) -> str:
    """A draft's text: its repeated table header, if any, then its span of the body."""
    return d.segs[0].prefix + body[d.start : d.end]


def covering_units(doc: ParsedDocument) -> list[Block]:
    """The document's blocks, plus paragraphs for any text they leave out."""
    body = doc.body
    units: list[Block] = []
    pos = 0
    path: tuple[str, ...] = ()
    page: int | None = None
    for block in sorted(doc.blocks, key=lambda b: b.start):
        start, end = max(block.start, pos), min(block.end, len(body))
        gap = lstrip_span(body, pos, start)
        if gap < start:
            gap_end = rstrip_span(body, gap, start)
            units.append(Block(BlockKind.PARAGRAPH, gap, gap_end, path, page=page))
        if end > start and body[start:end].strip():
            units.append(
                Block(
                    block.kind, start, end, block.heading_path, block.level, block.page, block.line
                )
            )
            pos = end
        path, page = block.heading_path, block.page
    gap = lstrip_span(body, pos, len(body))
    if gap < len(body):
        units.append(
            Block(BlockKind.PARAGRAPH, gap, rstrip_span(body, gap, len(body)), path, page=page)
        )
    return units
