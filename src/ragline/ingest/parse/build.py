"""A Markdown-like body built block by block, for formats with no text source.

Office files, e-books, spreadsheets and OCR output have no character spans to
keep, so their parsers write a body: headings on their own lines, tables as
pipe rows (header, then a ``---`` separator, which is what lets the section
chunker cut a big table between rows and repeat its header), lists as
``-``/``1.`` items. Blocks index into that body, so the chunkers and chunk
metadata (heading path, page) treat these formats exactly like Markdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.markdown import PATH_LEVELS
from ragline.types import Block, BlockKind, ParsedDocument


def missing_extra(source: str, kind: str, extra: str, exc: ImportError) -> IngestError:
    """The message for a format whose optional parser package is not installed."""
    return IngestError(
        source,
        None,
        f"reading {kind} files needs the {extra} extra ({exc.name} is not installed): "
        f"pip install -e '.[{extra}]'",
        environment=True,
    )


def collapse(text: str) -> str:
    """Runs of whitespace (newlines included) as one space, ends trimmed."""
    return " ".join(text.split())


def pipe_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as a pipe table, the first row its header; empty cells kept, ragged
    rows padded, so every line has the same columns."""
    cleaned = [[collapse(c).replace("|", "\\|") for c in row] for row in rows]
    cleaned = [r for r in cleaned if any(r)]
    if not cleaned:
        return ""
    width = max(len(r) for r in cleaned)
    lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in cleaned]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


class BodyBuilder:
    """Appends blocks to a body, separated by blank lines, recording their spans,
    the heading path in force and the page (PDF page, slide) they are on."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.blocks: list[Block] = []
        self.page: int | None = None
        self._pos = 0
        self._path: list[tuple[int, str]] = []

    @property
    def body(self) -> str:
        return "".join(self.parts)

    def reset_path(self) -> None:
        """Forget the headings in force (a new slide or sheet starts afresh)."""
        self._path.clear()

    def add(self, kind: BlockKind, text: str, *, level: int = 0, line: int = 0) -> None:
        """Append ``text`` (trailing whitespace removed) as one block; blank text is skipped."""
        text = "\n".join(part.rstrip() for part in text.strip("\n").split("\n")).rstrip()
        if not text.strip():
            return
        if kind is BlockKind.HEADING and level <= PATH_LEVELS:
            while self._path and self._path[-1][0] >= level:
                self._path.pop()
            self._path.append((level, collapse(text.lstrip("#"))))
        if self.parts:
            self.parts.append("\n\n")
            self._pos += 2
        path = tuple(t for _, t in self._path)
        end = self._pos + len(text)
        self.blocks.append(
            Block(kind, self._pos, end, path, level=level, page=self.page, line=line)
        )
        self.parts.append(text)
        self._pos = end

    def heading(self, title: str, level: int) -> None:
        """A ``#``-marked heading line (level clamped to 1–6)."""
        title = collapse(title)
        if title:
            level = min(max(level, 1), 6)
            self.add(BlockKind.HEADING, f"{'#' * level} {title}", level=level)

    def table(self, rows: Sequence[Sequence[str]]) -> None:
        self.add(BlockKind.TABLE, pipe_table(rows))

    def document(
        self, source: str, title: str, format: str, metadata: dict[str, Any]
    ) -> ParsedDocument:
        """The body built so far as a parsed document; with no ``title`` (none in
        the file's metadata, no heading), the file name's stem is the title."""
        return ParsedDocument(
            source=source,
            title=title or PurePath(source).stem,
            body=self.body,
            blocks=tuple(self.blocks),
            metadata=metadata,
            format=format,
        )
