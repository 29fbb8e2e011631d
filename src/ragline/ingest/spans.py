"""Trimming character spans of a text without copying it (parsers and chunkers
work on offsets into the body, so that no character is ever lost)."""

from __future__ import annotations


def rstrip_span(text: str, start: int, end: int) -> int:
    """``end`` moved left past trailing whitespace of ``text[start:end]``."""
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def lstrip_span(text: str, start: int, end: int) -> int:
    """``start`` moved right past leading whitespace of ``text[start:end]``."""
    while start < end and text[start].isspace():
        start += 1
    return start
