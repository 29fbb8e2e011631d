"""The recursive character splitter: fixed-size windows cut at natural breaks.

A baseline that knows nothing of Markdown: each chunk is at most
``chunk_chars`` characters and ends at the best separator found in the last
30 % of its window, so chunk sizes stay even while cuts still prefer
paragraph, line, sentence and word boundaries.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from ragline.ingest.chunk.splitter import CountTokens, count_many
from ragline.ingest.spans import rstrip_span
from ragline.types import Block, BlockKind, ChunkDraft, ParsedDocument

#: Highest priority first; after the last one comes a hard cut between characters.
SEPARATORS: tuple[str, ...] = ("\n\n\n", "\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")
#: The split point is searched in this last fraction of the window.
SEARCH_FRACTION = 0.3


class RecursiveChunker:
    """Windows of at most ``chunk_chars`` characters with ~``overlap_chars`` overlap.

    Guarantees: every chunk's ``text == body[start:end]`` and
    ``len(text) <= chunk_chars``; every non-whitespace character of the body is
    in some chunk. A chunk ends at the last occurrence of the highest-priority
    separator inside the last 30 % of its window and past the previous chunk's
    end (keeping the separator's punctuation, dropping its whitespace), else at
    a hard cut. The next chunk starts ``overlap_chars`` before that end, moved
    forward to the first word start if there is one. ``heading_path`` and
    ``page`` are those of the block the chunk starts in; the flags come from
    every block it overlaps. Code blocks are not protected: that is the
    section chunker's job.
    """

    def __init__(
        self, count_tokens: CountTokens, chunk_chars: int = 500, overlap_chars: int = 50
    ) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")
        if not 0 <= overlap_chars < chunk_chars:
            raise ValueError("overlap_chars must be >= 0 and smaller than chunk_chars")
        self.count_tokens = count_tokens
        self.chunk_chars = chunk_chars
        self.overlap_chars = overlap_chars

    def chunk(self, doc: ParsedDocument) -> list[ChunkDraft]:
        spans = self.spans(doc.body)
        texts = [doc.body[s:e] for s, e in spans]
        counts = count_many(self.count_tokens, texts)
        blocks = sorted(doc.blocks, key=lambda b: b.start)
        starts = [b.start for b in blocks]
        ends = [b.end for b in blocks]
        drafts = []
        for (start, end), text, n in zip(spans, texts, counts, strict=True):
            at = _block_at(blocks, starts, start)
            code, maths, table = _flags(blocks, ends, start, end)
            drafts.append(
                ChunkDraft(
                    text=text,
                    start=start,
                    end=end,
                    heading_path=at.heading_path if at else (),
                    token_count=n,
                    has_code=code,
                    has_equations=maths,
                    has_table=table,
                    page=at.page if at else None,
                )
            )
        return drafts

    def spans(self, body: str) -> list[tuple[int, int]]:
        """The ``(start, end)`` of every chunk of ``body``, in order."""
        size = self.chunk_chars
        search = max(1, round(size * SEARCH_FRACTION))
        n = len(body)
        out: list[tuple[int, int]] = []
        prev_end = 0
        pos = _skip_space(body, 0, n)
        while pos < n:
            limit = pos + size
            if limit >= n:
                out.append((pos, rstrip_span(body, pos, n)))
                break
            # past the previous end too, so a large overlap cannot nest chunks
            end = _split_point(body, max(limit - search, prev_end), limit)
            out.append((pos, end))
            prev_end = end
            if _skip_space(body, end, n) >= n:
                break
            pos = _skip_space(body, self._next_start(body, pos, end), n)
        return out

    def _next_start(self, body: str, pos: int, end: int) -> int:
        if self.overlap_chars == 0:
            return end
        back = max(end - self.overlap_chars, pos + 1)
        for i in range(back, end):  # the first word start in the overlap window
            if not body[i].isspace() and (i == 0 or body[i - 1].isspace()):
                return i
        return back


def _split_point(body: str, lo: int, hi: int) -> int:
    """Chunk end for the window ending at ``hi``: best separator in [lo, hi)."""
    for sep in SEPARATORS:
        i = body.rfind(sep, lo, hi)
        if i != -1:
            end = rstrip_span(body, lo, i + len(sep.rstrip()))
            if end > lo:
                return end
    return hi


def _block_at(blocks: Sequence[Block], starts: list[int], pos: int) -> Block | None:
    """The block containing ``pos``, else the last one before it, else the first."""
    i = bisect_right(starts, pos) - 1
    if i >= 0:
        return blocks[i]
    return blocks[0] if blocks else None


def _flags(
    blocks: Sequence[Block], ends: list[int], start: int, end: int
) -> tuple[bool, bool, bool]:
    code = maths = table = False
    i = bisect_right(ends, start)
    while i < len(blocks) and blocks[i].start < end:
        kind = blocks[i].kind
        code = code or kind is BlockKind.CODE
        maths = maths or kind is BlockKind.MATH
        table = table or kind is BlockKind.TABLE
        i += 1
    return code, maths, table


def _skip_space(text: str, pos: int, end: int) -> int:
    while pos < end and text[pos].isspace():
        pos += 1
    return pos
