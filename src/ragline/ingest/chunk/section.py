"""Section-aware chunking: chunks follow the document's H1–H4 sections.

The algorithm works on spans of the body, never on copies of its text, so each
chunk can be checked against the body it came from. Token counts come from the
embedder's tokenizer: once per block (batched), a few more while splitting an
oversized block, and once per final chunk.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from ragline.ingest.spans import lstrip_span, rstrip_span
from ragline.types import Block, BlockKind, ChunkDraft, ParsedDocument, embed_head

CountTokens = Callable[[str], int]

#: Bumped whenever the same settings start making other chunks (2: the window cut),
#: so caches keyed on the chunking (evaluation indexes) are built again.
SECTION_CHUNKER_VERSION = 2

#: Blocks that are never cut (a too-big table is cut only between rows).
ATOMIC_KINDS = frozenset({BlockKind.CODE, BlockKind.MATH, BlockKind.TABLE, BlockKind.HEADING})
_PATH_LEVELS = 4

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n\s*")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_NEWLINE = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)", re.MULTILINE)
_FENCE = re.compile(r"[ \t]{0,3}(?:`{3,}|~{3,})")


def count_many(count_tokens: CountTokens, texts: Sequence[str]) -> list[int]:
    """Token counts for many texts in one call when the counter can batch
    (``TokenCounter.count_many``), else one call each."""
    if not texts:
        return []
    batch = getattr(count_tokens, "count_many", None)
    if callable(batch):
        counts = batch(list(texts))
        return [int(n) for n in counts]
    return [count_tokens(t) for t in texts]


@dataclass(slots=True)
class _Seg:
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
class _Draft:
    segs: list[_Seg]
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


@dataclass(slots=True)
class _Splitter:
    """Cuts an oversized span into pieces that fit a token budget.

    Only cut points within ``chars_per_token * budget`` characters are tried, so
    splitting a huge paragraph costs O(length) tokenizer work, not O(length²);
    pieces cut short by that window are packed together again afterwards.
    """

    body: str
    count: CountTokens
    chars_per_token: int = 12

    def fits(self, text: str, budget: int) -> tuple[bool, int]:
        n = self.count(text)
        return n <= budget, n

    def split(
        self,
        start: int,
        end: int,
        levels: Sequence[Sequence[int]],
        budget: int,
        *,
        prefix: str = "",
        hard_cut: bool = True,
        first_budget: int = 0,
        prefix_first: bool = False,
    ) -> list[tuple[int, int, int, str]]:
        """Greedy pieces ``(start, end, tokens, prefix)``.

        Each piece ends at the furthest cut point of the best ``levels`` entry
        (positions where a piece may start, most natural first) whose prefix
        fits; with none, a hard character cut (or, without ``hard_cut``, the
        first cut point, leaving one oversized piece). ``prefix`` is prepended
        to every piece after the first one (a table's header rows, a code block's
        opening fence), and to the first one too with ``prefix_first``.

        With ``first_budget`` the first piece must fit that smaller budget at a
        natural cut point, or the result is empty: the caller wants to fill the
        room left in a chunk, but never by a hard cut.
        """
        body = self.body
        pieces: list[tuple[int, int, int, str]] = []
        pos = start
        if first_budget > 0:
            window = min(end, pos + self.chars_per_token * first_budget)
            cut, cut_tokens = self._furthest_cut(pos, window, levels, first_budget, "")
            if cut is None:
                return []
            pieces.append((pos, rstrip_span(body, pos, cut), cut_tokens, ""))
            pos = lstrip_span(body, cut, end)
        while True:
            head = prefix if pos != start or prefix_first else ""
            window = min(end, pos + self.chars_per_token * budget)
            if window == end:
                ok, n = self.fits(head + body[pos:end], budget)
                if ok:
                    pieces.append((pos, end, n, head))
                    return pieces
            cut, cut_tokens = self._furthest_cut(pos, window, levels, budget, head)
            if cut is None:
                if hard_cut:
                    cut, cut_tokens = self._char_cut(pos, window, budget, head)
                else:
                    cut = _first_after(levels, pos, end)
                    if cut is None:
                        n = self.count(head + body[pos:end])
                        pieces.append((pos, end, n, head))
                        return pieces
                    cut_tokens = self.count(head + body[pos : rstrip_span(body, pos, cut)])
            pieces.append((pos, rstrip_span(body, pos, cut), cut_tokens, head))
            pos = lstrip_span(body, cut, end)
            if pos >= end:
                return pieces

    def _furthest_cut(
        self, pos: int, window: int, levels: Sequence[Sequence[int]], budget: int, head: str
    ) -> tuple[int | None, int]:
        body = self.body
        for cuts in levels:
            lo = bisect_right(cuts, pos)
            hi = bisect_right(cuts, window)
            if lo >= hi:
                continue
            ok, n = self.fits(head + body[pos : rstrip_span(body, pos, cuts[lo])], budget)
            if not ok:
                continue
            best, best_n = lo, n
            lo += 1
            hi -= 1
            while lo <= hi:  # largest index whose piece still fits
                mid = (lo + hi) // 2
                ok, n = self.fits(head + body[pos : rstrip_span(body, pos, cuts[mid])], budget)
                if ok:
                    best, best_n = mid, n
                    lo = mid + 1
                else:
                    hi = mid - 1
            return cuts[best], best_n
        return None, 0

    def _char_cut(self, pos: int, window: int, budget: int, head: str) -> tuple[int, int]:
        best = pos + 1
        best_n = self.count(head + self.body[pos:best])
        lo, hi = pos + 2, window
        while lo <= hi:
            mid = (lo + hi) // 2
            ok, n = self.fits(head + self.body[pos:mid], budget)
            if ok:
                best, best_n = mid, n
                lo = mid + 1
            else:
                hi = mid - 1
        return best, best_n


class SectionChunker:
    """Chunks that respect sections, atomic blocks and a token budget.

    Guarantees (token counts are ``count_tokens`` of the final chunk text;
    packing sums per-block counts, which is exact for tokenizers that split on
    whitespace, and a final recount fixes any chunk where it was not):

    * **No loss**: every non-whitespace character of the body lies in at least
      one chunk's ``[start, end)``; text outside every block is wrapped as a
      paragraph, so it is covered too.
    * **Exact text**: ``text == body[start:end]``, except later parts of a split
      table, where ``text == text[:prefix_len] + body[start:end]`` and the prefix
      repeats the table's header and separator rows.
    * **Sections**: consecutive blocks of one H1–H4 section are grouped; a chunk
      crosses a section boundary only when an undersized piece is merged into a
      neighbour. ``heading_path`` is the section's path (for a merged chunk, the
      path of the larger of the two merged parts).
    * **Atomic blocks**: code blocks, display maths and headings are never cut
      and no chunk boundary or overlap falls inside them; one larger than
      ``max_tokens`` becomes its own oversized chunk. A table that fits is never
      cut; a larger one is cut between rows, each later part repeating the
      header (a single row larger than the budget stays whole).
    * **Pages**: a block on a new page (PDF page, slide) starts a new chunk and
      chunks of different pages are never merged, so a chunk's ``page`` is the
      page of all its text (a short slide or page end stays undersized).
    * **Lists** stay whole when they fit, else are cut between top-level items;
      an oversized paragraph (or list item) is cut between sentences, then
      lines, then words, then characters.
    * **Size**: ``token_count <= max_tokens``, except (a) a chunk holding a single
      oversized atomic block or table row, and (b) a chunk an undersized piece
      was merged into, which stays ``<= max_tokens + min_tokens``.
    * **Window**: with ``window`` (the text tokens the embedder reads), no chunk's
      embedded text (its title and heading path, then its text) passes it, so no
      chunk has a tail only keyword search can find: merges stop short of it, and
      a block larger than it, atomic or not, is cut at line breaks (then spaces,
      then characters), a later part of a code block repeating its opening fence
      and one of a table its header rows. (A heading path longer than half the
      window leaves the text half the window.)
    * **Overlap**: a chunk after the first of its section starts with up to
      ``overlap_tokens`` of the previous chunk's last prose block (whole
      sentences, else whole words), only when that fits in ``max_tokens``; never
      across a section or page boundary, never from a code block, maths or table.
    * **Merging**: a chunk under ``min_tokens`` (before overlap) is merged into
      the next chunk of its section, else the previous one; failing those,
      into the next chunk when it is a subsection (a lone heading joins what it
      introduces), else the previous, else the next chunk; never dropped. A
      merge that would pass ``max_tokens + min_tokens`` is not made, so a small
      piece between two big atomic blocks can stay undersized.
    """

    def __init__(
        self,
        count_tokens: CountTokens,
        max_tokens: int = 512,
        overlap_tokens: int = 50,
        min_tokens: int = 100,
        window: int | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if not 0 <= overlap_tokens < max_tokens:
            raise ValueError("overlap_tokens must be >= 0 and smaller than max_tokens")
        if min_tokens < 0:
            raise ValueError("min_tokens must be >= 0")
        if window is not None and window < 2:
            raise ValueError("window must be at least 2")
        self.count_tokens = count_tokens
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.min_tokens = min_tokens
        self.window = window

    def chunk(self, doc: ParsedDocument) -> list[ChunkDraft]:
        body = doc.body
        if not body.strip():
            return []
        splitter = _Splitter(body, self.count_tokens)
        room = self._room(doc.title)
        segs = self._segments(doc)
        drafts = self._pack(segs, splitter)
        drafts = self._merge(drafts, room)
        self._add_overlap(drafts, splitter)
        return self._finish(doc, drafts, splitter, room)

    def _room(self, title: str) -> Callable[[tuple[str, ...]], int]:
        """Tokens of chunk text the window has room for under a heading path
        (unbounded without a window); at least half the window."""
        window = self.window
        cache: dict[tuple[str, ...], int] = {}

        def room(path: tuple[str, ...]) -> int:
            if window is None:
                return 1 << 62
            if path not in cache:
                head = self.count_tokens(embed_head(title, path))
                cache[path] = max(window - head, window // 2)
            return cache[path]

        return room

    # -- 1. blocks → segments that each go into a chunk whole ------------------------

    def _segments(self, doc: ParsedDocument) -> list[_Seg]:
        body = doc.body
        units = _covering_units(doc)
        counts = count_many(self.count_tokens, [body[u.start : u.end] for u in units])
        segs: list[_Seg] = []
        section = 0
        for unit, n in zip(units, counts, strict=True):
            if unit.kind is BlockKind.HEADING and 0 < unit.level <= _PATH_LEVELS:
                section += 1
            atomic = unit.kind in ATOMIC_KINDS
            seg = _Seg(
                unit.start, unit.end, unit.kind, n, section, unit.heading_path, unit.page, atomic
            )
            if n > self.max_tokens and unit.kind is BlockKind.TABLE:
                seg.table_prefix, rows = _table_rows(body, unit.start, unit.end)
                seg.levels = [rows] if rows else None
            elif n > self.max_tokens and not atomic:
                seg.levels = _prose_levels(body, unit.start, unit.end)
                if unit.kind is BlockKind.LIST:
                    seg.levels.insert(0, _list_items(body, unit.start, unit.end))
            segs.append(seg)
        return segs

    def _cut(self, seg: _Seg, splitter: _Splitter, room: int) -> tuple[list[_Seg], bool]:
        """Cut an oversized block into pieces; the flag says whether the first
        piece was made to fill the ``room`` left in the current chunk."""
        assert seg.levels is not None
        table = seg.kind is BlockKind.TABLE
        budget = self.max_tokens if table else max(self.max_tokens - self.overlap_tokens, 1)
        start, end, levels, prefix = seg.start, seg.end, seg.levels, seg.table_prefix
        parts: list[tuple[int, int, int, str]] = []
        if room > 0:
            parts = splitter.split(
                start, end, levels, budget, prefix=prefix, hard_cut=not table, first_budget=room
            )
        fills = bool(parts)
        if not fills:
            parts = splitter.split(start, end, levels, budget, prefix=prefix, hard_cut=not table)
        pieces = [
            _Seg(s, e, seg.kind, t, seg.section, seg.path, seg.page, seg.atomic, p)
            for s, e, t, p in parts
        ]
        return pieces, fills

    # -- 2. segments → chunks of one section, greedily ---------------------------------

    def _pack(self, segs: list[_Seg], splitter: _Splitter) -> list[_Draft]:
        drafts: list[_Draft] = []
        cur: list[_Seg] = []
        cur_tokens = 0
        budget = self.max_tokens

        def flush(*, carry_heading: bool) -> None:
            nonlocal cur, cur_tokens, budget
            carry: list[_Seg] = []
            if carry_heading and len(cur) > 1 and cur[-1].kind is BlockKind.HEADING:
                carry = [cur.pop()]  # an H5/H6 goes with what follows it
            drafts.append(_Draft(cur, sum(s.tokens for s in cur), cur[0].path))
            # the next chunk of the section keeps room for the overlap it will get
            budget = self.max_tokens - (0 if cur[-1].atomic else self.overlap_tokens)
            cur = carry
            cur_tokens = sum(s.tokens for s in carry)

        for seg in segs:
            if cur and seg.section != cur[-1].section:
                flush(carry_heading=False)
                budget = self.max_tokens
            elif cur and None is not seg.page != cur[-1].page is not None:
                flush(carry_heading=False)  # a chunk cites one page: a new page starts one
            pieces = [seg]
            if seg.levels is not None:  # too big for any chunk: cut it, filling this one
                pieces, fills = self._cut(seg, splitter, budget - cur_tokens)
                if fills:
                    cur.append(pieces[0])
                    cur_tokens += pieces[0].tokens
                    pieces = pieces[1:]
            for piece in pieces:
                if cur and (piece.prefix or cur_tokens + piece.tokens > budget):
                    flush(carry_heading=True)
                cur.append(piece)
                cur_tokens += piece.tokens
        if cur:
            flush(carry_heading=False)
        return drafts

    # -- 3. undersized chunks → merged into a neighbour ---------------------------------

    def _merge(self, drafts: list[_Draft], room: Callable[[tuple[str, ...]], int]) -> list[_Draft]:
        limit = self.max_tokens + self.min_tokens
        i = 0
        while i < len(drafts):
            d = drafts[i]
            if d.tokens >= self.min_tokens:
                i += 1
                continue
            target = self._merge_target(drafts, i, limit, room)
            if target is None:
                i += 1
                continue
            first, second = sorted((i, target))
            a, b = drafts[first], drafts[second]
            path = a.path if a.tokens >= b.tokens else b.path  # the bulk decides
            drafts[first] = _Draft(a.segs + b.segs, a.tokens + b.tokens, path, merged=True)
            del drafts[second]
            i = first
        return drafts

    def _merge_target(
        self, drafts: list[_Draft], i: int, limit: int, room: Callable[[tuple[str, ...]], int]
    ) -> int | None:
        d = drafts[i]
        nxt = i + 1 if i + 1 < len(drafts) else None
        prv = i - 1 if i > 0 else None

        def ok(j: int | None) -> bool:
            if j is None:
                return False
            fits = min(limit, room(d.path), room(drafts[j].path))
            if drafts[j].tokens + d.tokens > fits:
                return False
            if None is not drafts[j].segs[0].page != d.segs[0].page is not None:
                return False  # a chunk cites one page: a short slide stays its own chunk
            # a table part's repeated header must stay at the very start of its chunk
            return not (j == nxt and drafts[j].segs[0].prefix)

        def same_section(j: int | None) -> bool:
            if j is None:
                return False
            if j > i:
                return d.segs[-1].section == drafts[j].segs[0].section
            return drafts[j].segs[-1].section == d.segs[0].section

        def subsection(j: int | None) -> bool:
            return j is not None and drafts[j].path[: len(d.path)] == d.path

        for j, wanted in (
            (nxt, same_section),
            (prv, same_section),
            (nxt, subsection),
            (prv, ok),
            (nxt, ok),
        ):
            if wanted(j) and ok(j):
                return j
        return None

    # -- 4. overlap: start a chunk with the previous chunk's last sentences ---------------

    def _add_overlap(self, drafts: list[_Draft], splitter: _Splitter) -> None:
        if self.overlap_tokens <= 0:
            return
        body = splitter.body
        for prev, d in pairwise(drafts):
            last, first = prev.segs[-1], d.segs[0]
            room = min(self.overlap_tokens, self.max_tokens - d.tokens)
            if room <= 0 or last.atomic or first.prefix or last.section != first.section:
                continue
            if last.page != first.page:  # the chunk cites one page: no text of another
                continue
            # never repeat the whole previous chunk
            whole = len(prev.segs) == 1 and prev.overlap_start is None
            floor = last.start + 1 if whole else last.start
            for starts in _overlap_starts(body, last.start, last.end, floor):
                found = _earliest_fit(splitter, starts, last.end, room)
                if found is not None:
                    d.overlap_start, d.overlap_tokens = found
                    d.tokens += d.overlap_tokens
                    break

    # -- 5. drafts → ChunkDraft, with one token recount per chunk -------------------------

    def _finish(
        self,
        doc: ParsedDocument,
        drafts: list[_Draft],
        splitter: _Splitter,
        room: Callable[[tuple[str, ...]], int],
    ) -> list[ChunkDraft]:
        body = doc.body
        texts = [_text(body, d) for d in drafts]
        # a chunk that is one piece, counted as such, needs no recount
        exact = [len(d.segs) == 1 and d.overlap_start is None for d in drafts]
        pending = [t for t, e in zip(texts, exact, strict=True) if not e]
        recount = iter(count_many(self.count_tokens, pending))
        counts = [d.tokens if e else next(recount) for d, e in zip(drafts, exact, strict=True)]
        out: list[ChunkDraft] = []
        for draft, text, n in zip(drafts, texts, counts, strict=True):
            if out and draft.overlap_start is not None and draft.overlap_start <= out[-1].start:
                # the previous chunk was cut to the window: the overlap would repeat
                # (or pass) its last piece whole
                draft.overlap_start = None
                text = _text(body, draft)
                n = self.count_tokens(text)
            for d, t, k in self._enforce_limit(splitter, room, draft, text, n):
                kinds = {s.kind for s in d.segs}
                out.append(
                    ChunkDraft(
                        text=t,
                        start=d.start,
                        end=d.end,
                        heading_path=d.path,
                        token_count=k,
                        has_code=BlockKind.CODE in kinds,
                        has_equations=BlockKind.MATH in kinds,
                        has_table=BlockKind.TABLE in kinds,
                        page=d.segs[0].page,
                        prefix_len=len(d.segs[0].prefix),
                    )
                )
        return out

    def _enforce_limit(
        self,
        splitter: _Splitter,
        room: Callable[[tuple[str, ...]], int],
        d: _Draft,
        text: str,
        n: int,
    ) -> list[tuple[_Draft, str, int]]:
        """Keep the size guarantee even where summed counts under-estimated the
        real one (a tokenizer that is not additive), and the window always: drop
        the overlap, then cut the chunk between its segments, then (a single
        block larger than the window) within it. Rare, so counted one text at a
        time."""
        body = splitter.body
        fits = room(d.path)
        limit = min(self.max_tokens + (self.min_tokens if d.merged else 0), fits)
        if n <= limit:
            return [(d, text, n)]
        if d.overlap_start is not None:
            d.overlap_start = None
            text = _text(body, d)
            return self._enforce_limit(splitter, room, d, text, self.count_tokens(text))
        if len(d.segs) == 1:  # an atomic block, or a piece whose count is exact
            if n <= fits:
                return [(d, text, n)]
            return [
                (
                    _Draft([p], p.tokens, d.path),
                    _text(body, _Draft([p], p.tokens, d.path)),
                    p.tokens,
                )
                for p in _window_pieces(splitter, d.segs[0], fits)
            ]
        half = len(d.segs) // 2
        out: list[tuple[_Draft, str, int]] = []
        for segs in (d.segs[:half], d.segs[half:]):
            part = _Draft(segs, sum(s.tokens for s in segs), d.path)
            part_text = _text(body, part)
            out.extend(
                self._enforce_limit(splitter, room, part, part_text, self.count_tokens(part_text))
            )
        return out


def _window_pieces(splitter: _Splitter, seg: _Seg, budget: int) -> list[_Seg]:
    """A block larger than the window, cut into pieces that fit it: at line
    breaks, then spaces, then characters (prose first at blank lines and
    sentences). A later piece of a table repeats its header rows and one of a
    fenced code block its opening fence, so each piece reads as what it is; a
    repeat longer than half the budget is left out."""
    body, start, end = splitter.body, seg.start, seg.end
    prefix, prefix_first = seg.prefix, bool(seg.prefix)
    lines = [m.end() for m in _NEWLINE.finditer(body, start, end) if m.end() < end]
    words = [m.end() for m in _SPACE.finditer(body, start, end) if m.end() < end]
    levels = [lines, words]
    if seg.kind is BlockKind.TABLE:
        header, rows = _table_rows(body, start, end)
        levels = [rows, words] if rows and not prefix else levels
        prefix = prefix or seg.table_prefix or header
    elif seg.kind is BlockKind.CODE and not prefix:
        first = body[start : body.find("\n", start, end) if "\n" in body[start:end] else end]
        prefix = first + "\n" if _FENCE.match(first) else ""
    elif seg.kind not in ATOMIC_KINDS:
        levels = _prose_levels(body, start, end)
    if prefix and splitter.count(prefix) > budget // 2:
        prefix, prefix_first = "", False
    parts = splitter.split(start, end, levels, budget, prefix=prefix, prefix_first=prefix_first)
    return [
        _Seg(s, e, seg.kind, t, seg.section, seg.path, seg.page, seg.atomic, p)
        for s, e, t, p in parts
    ]


def _text(body: str, d: _Draft) -> str:
    return d.segs[0].prefix + body[d.start : d.end]


def _covering_units(doc: ParsedDocument) -> list[Block]:
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


def _prose_levels(body: str, start: int, end: int) -> list[list[int]]:
    """Where a piece of prose may start: after a blank line, a sentence, a line, a word."""
    return [
        [m.end() for m in _BLANK_LINE.finditer(body, start, end) if m.end() < end],
        [p for p in _sentence_starts(body, start, end) if p < end],
        [m.end() for m in _NEWLINE.finditer(body, start, end) if m.end() < end],
        [m.end() for m in _SPACE.finditer(body, start, end) if m.end() < end],
    ]


def _sentence_starts(body: str, start: int, end: int) -> list[int]:
    """Starts of sentences, not counting the "3. " of a numbered list item."""
    starts = []
    for m in _SENTENCE_END.finditer(body, start, end):
        line_start = max(body.rfind("\n", start, m.start()) + 1, start)
        if not body[line_start : m.start()].strip().isdigit():
            starts.append(m.end())
    return starts


def _list_items(body: str, start: int, end: int) -> list[int]:
    """Starts of the list's own items (same indentation as its first line)."""
    first = _LIST_ITEM.match(body, start)
    indent = len(first.group()) - len(first.group().lstrip(" \t")) if first else 0
    items = []
    for m in _LIST_ITEM.finditer(body, start, end):
        line_start = m.start()
        if line_start > start and body[line_start - 1] == "\n":
            text = m.group()
            if len(text) - len(text.lstrip(" \t")) == indent:
                items.append(line_start)
    return items


def _table_rows(body: str, start: int, end: int) -> tuple[str, list[int]]:
    """A table's header (header and separator rows, plus a newline) and the
    starts of the rows it may be cut before (never before the first body row)."""
    line_ends = [i for i in range(start, end) if body[i] == "\n"]
    if len(line_ends) < 2:
        return "", []
    return body[start : line_ends[1]] + "\n", [i + 1 for i in line_ends[2:]]


def _overlap_starts(body: str, start: int, end: int, floor: int) -> list[list[int]]:
    """Candidate overlap starts in [floor, end): sentence starts, then word starts."""
    sentences = _sentence_starts(body, start, end)
    words = [m.end() for m in _SPACE.finditer(body, start, end)]
    head = [start] if start >= floor else []
    return [
        [p for p in [*head, *sentences] if floor <= p < end],
        [p for p in [*head, *words] if floor <= p < end],
    ]


def _earliest_fit(
    splitter: _Splitter, starts: list[int], end: int, room: int
) -> tuple[int, int] | None:
    """The earliest start whose text up to ``end`` fits in ``room`` tokens."""
    if not starts:
        return None
    body = splitter.body
    ok, n = splitter.fits(body[starts[-1] : end], room)
    if not ok:
        return None
    best, best_n = len(starts) - 1, n
    lo, hi = 0, len(starts) - 2
    while lo <= hi:
        mid = (lo + hi) // 2
        ok, n = splitter.fits(body[starts[mid] : end], room)
        if ok:
            best, best_n = mid, n
            hi = mid - 1
        else:
            lo = mid + 1
    return starts[best], best_n


def _first_after(levels: Sequence[Sequence[int]], pos: int, end: int) -> int | None:
    firsts = [c[i] for c in levels if (i := bisect_right(c, pos)) < len(c) and c[i] < end]
    return min(firsts) if firsts else None
