"""ParsedDocument → ChunkDraft spans: two chunkers behind one ``chunk(doc)`` call.

:class:`SectionChunker` (the default) follows the document's sections and
keeps code, maths and tables whole; :class:`RecursiveChunker` is the
fixed-window character splitter of the specification; :class:`CappedChunker`
bounds either one's chunks in characters.
"""

from __future__ import annotations

from typing import Protocol

from ragline.ingest.chunk.cap import CappedChunker
from ragline.ingest.chunk.recursive import RecursiveChunker
from ragline.ingest.chunk.section import SectionChunker
from ragline.ingest.chunk.splitter import CountTokens, count_many
from ragline.types import ChunkDraft, ParsedDocument

__all__ = [
    "CappedChunker",
    "Chunker",
    "CountTokens",
    "RecursiveChunker",
    "SectionChunker",
    "count_many",
]


class Chunker(Protocol):
    """Anything that cuts a parsed document into chunk drafts."""

    def chunk(self, doc: ParsedDocument) -> list[ChunkDraft]: ...
