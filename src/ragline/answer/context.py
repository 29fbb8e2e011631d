"""Context assembly: retrieved hits → numbered ``[n] Title > Section`` blocks.

Blocks keep the retriever's rank order, so ``[1]`` is the best hit. A neighbour
added by expansion is merged into the block of the hit it was fetched for (with
the chunk overlap removed), so the generator reads continuous text and cites
one number for it. The whole context is cut at ``max_tokens`` measured with the
embedding model's tokenizer, and only ever at a sentence (or code block / table
row) end: a cut sentence can make a generator state half a fact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragline.answer.sentences import PROSE, Segment, segments
from ragline.types import Chunk, Hit, Source

#: Counts tokens of a text (``ragline.embed.tokenizer.TokenCounter`` in production).
CountTokens = Callable[[str], int]

#: A block is cut to fit only if at least this many tokens of it would remain.
MIN_CUT_TOKENS = 24


@dataclass(frozen=True, slots=True)
class ContextPart:
    """Where one chunk's text sits in its block: ``block.text[offset:offset + length]``
    is ``chunk.text[skip:skip + length]`` (``skip`` > 0 drops the overlap with the
    chunk before it)."""

    chunk: Chunk
    offset: int
    skip: int
    length: int


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """One numbered block of the context."""

    number: int
    hit: Hit
    label: str
    text: str
    parts: tuple[ContextPart, ...]

    def render(self) -> str:
        return f"[{self.number}] {self.label}\n{self.text}"

    def locate(self, start: int, end: int) -> tuple[Chunk, int, int]:
        """The chunk holding ``text[start:end]`` and the span in ``chunk.text``.

        A span across two merged chunks is attributed to the one it starts in and
        clipped to it.
        """
        for part in self.parts:
            if part.offset <= start < part.offset + part.length or part is self.parts[-1]:
                s = max(0, start - part.offset)
                e = min(part.length, end - part.offset)
                return part.chunk, part.skip + s, part.skip + max(s, e)
        raise ValueError("context block has no parts")  # pragma: no cover - built non-empty

    def source(self) -> Source:
        return Source(
            number=self.number,
            hit=self.hit,
            chunk_ids=tuple(p.chunk.id for p in self.parts),
            label=self.label,
        )


@dataclass(frozen=True, slots=True)
class Context:
    """The numbered blocks a generator answers from."""

    blocks: tuple[ContextBlock, ...]
    token_count: int
    truncated: bool  # True when hits (or the end of one) did not fit the budget

    def render(self) -> str:
        return "\n\n".join(b.render() for b in self.blocks)

    def block(self, number: int) -> ContextBlock | None:
        if 1 <= number <= len(self.blocks):
            return self.blocks[number - 1]
        return None

    @property
    def chunk_ids(self) -> frozenset[str]:
        return frozenset(p.chunk.id for b in self.blocks for p in b.parts)


def block_label(chunk: Chunk) -> str:
    """``Title > Section`` (just the title when the section is the title or empty)."""
    title = chunk.title.strip()
    section = chunk.section.strip()
    if not section or section == title:
        return title or section or chunk.source
    if not title:
        return section
    return f"{title} > {section}"


def group_hits(hits: Sequence[Hit]) -> list[tuple[Hit, list[Chunk]]]:
    """Each retrieved hit (rank order) with its chunk and the neighbours expanded
    for it, in document order. A neighbour whose parent is missing is its own group."""
    primary_ids = {h.chunk.id for h in hits if h.expanded_from is None}
    groups: dict[str, tuple[Hit, list[Chunk]]] = {}
    order: list[str] = []
    for h in hits:
        parent = h.expanded_from if h.expanded_from in primary_ids else None
        key = parent or h.chunk.id
        if key not in groups:
            groups[key] = (h, [])
            order.append(key)
        if parent is None:
            groups[key] = (h, groups[key][1])
        if all(c.id != h.chunk.id for c in groups[key][1]):
            groups[key][1].append(h.chunk)
    out = []
    for key in order:
        hit, chunks = groups[key]
        out.append((hit, sorted(chunks, key=lambda c: (c.doc_id, c.chunk_index))))
    return out


def _body_length(chunk: Chunk) -> int:
    return max(0, chunk.end_char - chunk.start_char)


def merge_chunks(chunks: Sequence[Chunk]) -> tuple[str, tuple[ContextPart, ...]]:
    """Concatenate chunks of one document in order, dropping the text a chunk repeats
    from the one before (section-chunker overlap, a repeated table header)."""
    text = ""
    parts: list[ContextPart] = []
    prev: Chunk | None = None
    for c in chunks:
        skip = 0
        joiner = ""
        if prev is not None:
            prefix = max(0, len(c.text) - _body_length(c))  # repeated table header
            same_doc = c.doc_id == prev.doc_id
            overlap = prev.end_char - c.start_char if same_doc else -1
            if same_doc and 0 <= overlap <= _body_length(c) and prefix + overlap <= len(c.text):
                skip = prefix + overlap
                if (
                    skip
                    and text
                    and not text[-1].isspace()
                    and not c.text[skip : skip + 1].isspace()
                ):
                    joiner = "\n"
            else:
                joiner = "\n\n"
        piece = c.text[skip:]
        text += joiner
        parts.append(ContextPart(chunk=c, offset=len(text), skip=skip, length=len(piece)))
        text += piece
        prev = c
    return text, tuple(parts)


def cut_points(text: str) -> list[int]:
    """Offsets where ``text`` may be cut: after a sentence, a code block, a table row."""
    segs: list[Segment] = segments(text)
    return [s.end for s in segs if s.kind == PROSE or s.end > s.start]


def cut_to_budget(text: str, count_tokens: CountTokens, budget: int) -> str:
    """The longest prefix of ``text`` that ends at a cut point and fits ``budget``
    tokens ("" when not even the first sentence fits)."""
    if count_tokens(text) <= budget:
        return text
    points = cut_points(text)
    lo, hi, best = 0, len(points) - 1, ""
    while lo <= hi:  # token counts grow with the prefix: binary search the last fit
        mid = (lo + hi) // 2
        prefix = text[: points[mid]]
        if count_tokens(prefix) <= budget:
            best, lo = prefix, mid + 1
        else:
            hi = mid - 1
    return best.rstrip()


def build_context(hits: Sequence[Hit], count_tokens: CountTokens, max_tokens: int) -> Context:
    """Numbered blocks for ``hits`` (rank order), within ``max_tokens`` tokens.

    Blocks are added whole while they fit. The first that does not is cut at the
    last sentence end that fits (if at least :data:`MIN_CUT_TOKENS` of it can
    stay) and the context ends there: a later, worse hit never displaces the
    remainder of a better one. Block costs add up because the WordPiece tokenizer
    splits on whitespace: the blank lines between blocks cost nothing.
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    blocks: list[ContextBlock] = []
    used = 0
    truncated = False
    for hit, chunks in group_hits(hits):
        number = len(blocks) + 1
        text, parts = merge_chunks(chunks)
        label = block_label(hit.chunk)
        header = f"[{number}] {label}\n"
        cost = count_tokens(header + text)
        if used + cost <= max_tokens:
            blocks.append(ContextBlock(number, hit, label, text, parts))
            used += cost
            continue
        truncated = True
        room = max_tokens - used - count_tokens(header)
        if room >= MIN_CUT_TOKENS:
            cut = cut_to_budget(text, count_tokens, room)
            if cut:
                kept = tuple(
                    ContextPart(p.chunk, p.offset, p.skip, min(p.length, len(cut) - p.offset))
                    for p in parts
                    if p.offset < len(cut)
                )
                blocks.append(ContextBlock(number, hit, label, cut, kept))
                used += count_tokens(header + cut)
        break
    return Context(blocks=tuple(blocks), token_count=used, truncated=truncated)
