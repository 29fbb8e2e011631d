"""Section-aware chunking: chunks follow the document's H1–H4 sections.

The algorithm works on spans of the body, never on copies of its text, so each
chunk can be checked against the body it came from. Token counts come from the
embedder's tokenizer: once per block (batched), a few more while splitting an
oversized block, and once per final chunk.

Beside it: :mod:`.segments` (the pieces chunks are built from), :mod:`.splitter`
(cutting a span to a token budget) and :mod:`.cuts` (where a span may be cut).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from ragline.ingest.chunk.cuts import list_items, overlap_starts, prose_levels, table_rows
from ragline.ingest.chunk.segments import (
    ATOMIC_KINDS,
    Draft,
    Seg,
    covering_units,
    draft_text,
    pieces_of,
    window_pieces,
)
from ragline.ingest.chunk.splitter import CountTokens, Splitter, count_many
from ragline.types import BlockKind, ChunkDraft, ParsedDocument, embed_head

#: Bumped whenever the same settings start making other chunks (2: the window cut),
#: so caches keyed on the chunking (evaluation indexes) are built again.
SECTION_CHUNKER_VERSION = 2

_PATH_LEVELS = 4


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
        splitter = Splitter(body, self.count_tokens)
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

    def _segments(self, doc: ParsedDocument) -> list[Seg]:
        body = doc.body
        units = covering_units(doc)
        counts = count_many(self.count_tokens, [body[u.start : u.end] for u in units])
        segs: list[Seg] = []
        section = 0
        for unit, n in zip(units, counts, strict=True):
            if unit.kind is BlockKind.HEADING and 0 < unit.level <= _PATH_LEVELS:
                section += 1
            atomic = unit.kind in ATOMIC_KINDS
            seg = Seg(
                unit.start, unit.end, unit.kind, n, section, unit.heading_path, unit.page, atomic
            )
            if n > self.max_tokens and unit.kind is BlockKind.TABLE:
                seg.table_prefix, rows = table_rows(body, unit.start, unit.end)
                seg.levels = [rows] if rows else None
            elif n > self.max_tokens and not atomic:
                seg.levels = prose_levels(body, unit.start, unit.end)
                if unit.kind is BlockKind.LIST:
                    seg.levels.insert(0, list_items(body, unit.start, unit.end))
            segs.append(seg)
        return segs

    def _cut(self, seg: Seg, splitter: Splitter, room: int) -> tuple[list[Seg], bool]:
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
        return pieces_of(seg, parts), fills

    # -- 2. segments → chunks of one section, greedily ---------------------------------

    def _pack(self, segs: list[Seg], splitter: Splitter) -> list[Draft]:
        drafts: list[Draft] = []
        cur: list[Seg] = []
        cur_tokens = 0
        budget = self.max_tokens

        def flush(*, carry_heading: bool) -> None:
            nonlocal cur, cur_tokens, budget
            carry: list[Seg] = []
            if carry_heading and len(cur) > 1 and cur[-1].kind is BlockKind.HEADING:
                carry = [cur.pop()]  # an H5/H6 goes with what follows it
            drafts.append(Draft(cur, sum(s.tokens for s in cur), cur[0].path))
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

    def _merge(self, drafts: list[Draft], room: Callable[[tuple[str, ...]], int]) -> list[Draft]:
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
            drafts[first] = Draft(a.segs + b.segs, a.tokens + b.tokens, path, merged=True)
            del drafts[second]
            i = first
        return drafts

    def _merge_target(
        self, drafts: list[Draft], i: int, limit: int, room: Callable[[tuple[str, ...]], int]
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

    def _add_overlap(self, drafts: list[Draft], splitter: Splitter) -> None:
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
            for starts in overlap_starts(body, last.start, last.end, floor):
                found = splitter.earliest_fit(starts, last.end, room)
                if found is not None:
                    d.overlap_start, d.overlap_tokens = found
                    d.tokens += d.overlap_tokens
                    break

    # -- 5. drafts → ChunkDraft, with one token recount per chunk -------------------------

    def _finish(
        self,
        doc: ParsedDocument,
        drafts: list[Draft],
        splitter: Splitter,
        room: Callable[[tuple[str, ...]], int],
    ) -> list[ChunkDraft]:
        body = doc.body
        texts = [draft_text(body, d) for d in drafts]
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
                text = draft_text(body, draft)
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
        splitter: Splitter,
        room: Callable[[tuple[str, ...]], int],
        d: Draft,
        text: str,
        n: int,
    ) -> list[tuple[Draft, str, int]]:
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
            text = draft_text(body, d)
            return self._enforce_limit(splitter, room, d, text, self.count_tokens(text))
        if len(d.segs) == 1:  # an atomic block, or a piece whose count is exact
            if n <= fits:
                return [(d, text, n)]
            return [
                (
                    Draft([p], p.tokens, d.path),
                    draft_text(body, Draft([p], p.tokens, d.path)),
                    p.tokens,
                )
                for p in window_pieces(splitter, d.segs[0], fits)
            ]
        half = len(d.segs) // 2
        out: list[tuple[Draft, str, int]] = []
        for segs in (d.segs[:half], d.segs[half:]):
            part = Draft(segs, sum(s.tokens for s in segs), d.path)
            part_text = draft_text(body, part)
            out.extend(
                self._enforce_limit(splitter, room, part, part_text, self.count_tokens(part_text))
            )
        return out
