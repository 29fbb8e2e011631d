"""Plain text → :class:`ParsedDocument`: paragraphs are the only structure."""

from __future__ import annotations

import re
from pathlib import PurePath

from ragline.types import Block, BlockKind, ParsedDocument

#: A first line longer than this is prose, not a title.
MAX_TITLE_CHARS = 120

_PARAGRAPH = re.compile(r"\S(?:.*\S)?(?:\n[^\S\n]*\S.*)*")
_TRAILING = re.compile(r"\s+$")


def parse_text(text: str, source: str) -> ParsedDocument:
    """Split on blank lines; each paragraph is a block spanning its exact text."""
    body = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    blocks: list[Block] = []
    line = 1
    pos = 0
    for m in _PARAGRAPH.finditer(body):
        line += body.count("\n", pos, m.start())
        pos = m.start()
        end = m.start() + len(_TRAILING.sub("", m.group()))
        blocks.append(Block(BlockKind.PARAGRAPH, m.start(), end, (), line=line))
    return ParsedDocument(
        source=source,
        title=_title(body, source),
        body=body,
        blocks=tuple(blocks),
        format="text",
    )


def _title(body: str, source: str) -> str:
    for raw in body.split("\n"):
        first = raw.strip()
        if first:
            return first if len(first) < MAX_TITLE_CHARS else PurePath(source).stem
    return PurePath(source).stem
