"""A hard cap on a chunk's characters, whatever the chunker decided.

Token budgets do not bound size: a tokenizer counts a 19 MB line without spaces
as one unknown token, and a code block or table row larger than the budget is
kept whole on purpose. Every search that hit such a chunk returned all of it.
:class:`CappedChunker` cuts any chunk longer than ``max_chars`` into pieces of at
most ``max_chars``, at the last line break, else the last space, in the second
half of the window, else exactly at the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from ragline.types import ChunkDraft, ParsedDocument


class _Chunker(Protocol):
    def chunk(self, doc: ParsedDocument) -> list[ChunkDraft]: ...


def cut_spans(body: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """``[start, end)`` as spans of at most ``max_chars`` characters, whitespace at
    their ends trimmed and whitespace-only spans dropped (pure; O(length))."""
    out: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        while pos < end and body[pos].isspace():
            pos += 1
        if pos >= end:
            break
        stop = min(end, pos + max_chars)
        if stop < end:
            half = pos + max_chars // 2
            cut = body.rfind("\n", half, stop)
            if cut <= pos:
                cut = max(body.rfind(" ", half, stop), body.rfind("\t", half, stop))
            if cut > pos:
                stop = cut
        last = stop
        while last > pos and body[last - 1].isspace():
            last -= 1
        if last > pos:
            out.append((pos, last))
        pos = stop
    return out


class CappedChunker:
    """Wraps a chunker so that no chunk's text exceeds ``max_chars`` characters.

    A chunk within the cap is returned as it is. A longer one is cut (a split
    table's repeated header is dropped from it), each piece keeping the chunk's
    heading path, page and flags, with its tokens counted again."""

    def __init__(self, inner: _Chunker, count_tokens: Callable[[str], int], max_chars: int) -> None:
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        self.inner = inner
        self.count_tokens = count_tokens
        self.max_chars = max_chars

    def chunk(self, doc: ParsedDocument) -> list[ChunkDraft]:
        out: list[ChunkDraft] = []
        for draft in self.inner.chunk(doc):
            if len(draft.text) <= self.max_chars:
                out.append(draft)
                continue
            for s, e in cut_spans(doc.body, draft.start, draft.end, self.max_chars):
                text = doc.body[s:e]
                out.append(
                    replace(
                        draft,
                        text=text,
                        start=s,
                        end=e,
                        token_count=self.count_tokens(text),
                        prefix_len=0,
                    )
                )
        return out
