"""Where a span of the body may be cut: positions where a piece may start, found
with regular expressions over the span (never over a copy of its text)."""

from __future__ import annotations

import re

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n\s*")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_NEWLINE = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)", re.MULTILINE)
_FENCE = re.compile(r"[ \t]{0,3}(?:`{3,}|~{3,})")


def line_starts(body: str, start: int, end: int) -> list[int]:
    """Starts of the lines after the first (past their indentation)."""
    return [m.end() for m in _NEWLINE.finditer(body, start, end) if m.end() < end]


def word_starts(body: str, start: int, end: int) -> list[int]:
    """Starts of the words after the first."""
    return [m.end() for m in _SPACE.finditer(body, start, end) if m.end() < end]


def prose_levels(body: str, start: int, end: int) -> list[list[int]]:
    """Where a piece of prose may start: after a blank line, a sentence, a line, a word."""
    return [
        [m.end() for m in _BLANK_LINE.finditer(body, start, end) if m.end() < end],
        [p for p in _sentence_starts(body, start, end) if p < end],
        line_starts(body, start, end),
        word_starts(body, start, end),
    ]


def _sentence_starts(body: str, start: int, end: int) -> list[int]:
    """Starts of sentences, not counting the "3. " of a numbered list item."""
    starts = []
    for m in _SENTENCE_END.finditer(body, start, end):
        line_start = max(body.rfind("\n", start, m.start()) + 1, start)
        if not body[line_start : m.start()].strip().isdigit():
            starts.append(m.end())
    return starts


def list_items(body: str, start: int, end: int) -> list[int]:
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


def table_rows(body: str, start: int, end: int) -> tuple[str, list[int]]:
    """A table's header (header and separator rows, plus a newline) and the
    starts of the rows it may be cut before (never before the first body row)."""
    line_ends = [i for i in range(start, end) if body[i] == "\n"]
    if len(line_ends) < 2:
        return "", []
    return body[start : line_ends[1]] + "\n", [i + 1 for i in line_ends[2:]]


def opening_fence(body: str, start: int, end: int) -> str:
    """A fenced code block's opening fence line plus a newline; "" when unfenced."""
    first = body[start : body.find("\n", start, end) if "\n" in body[start:end] else end]
    return first + "\n" if _FENCE.match(first) else ""


def overlap_starts(body: str, start: int, end: int, floor: int) -> list[list[int]]:
    """Candidate overlap starts in [floor, end): sentence starts, then word starts."""
    sentences = _sentence_starts(body, start, end)
    words = word_starts(body, start, end)
    head = [start] if start >= floor else []
    return [
        [p for p in [*head, *sentences] if floor <= p < end],
        [p for p in [*head, *words] if floor <= p < end],
    ]
