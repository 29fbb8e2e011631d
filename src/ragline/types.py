"""Plain data passed between pipeline stages.

Every stage takes and returns these values, so a parser, chunker, store or
fusion function can be tested (and replaced) without the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: Metadata values a filter can match on (stores push these down as equality tests).
Scalar = str | int | float | bool
Filters = dict[str, Scalar]


class BlockKind(StrEnum):
    """What a block of a parsed document is; chunkers treat some kinds as atomic."""

    HEADING = "heading"
    PARAGRAPH = "paragraph"
    CODE = "code"  # fenced or indented code: never split
    TABLE = "table"  # never split, except a forced split that repeats the header row
    LIST = "list"  # kept together when it fits
    MATH = "math"  # display maths ($$ … $$): never split
    QUOTE = "quote"
    HTML = "html"
    RULE = "rule"
    FRONT_MATTER = "front_matter"  # excluded from the body; kept for completeness
    PAGE = "page"  # a PDF page's text (the page number is in Block.page)


@dataclass(frozen=True, slots=True)
class Block:
    """A top-level structural element of a document body.

    ``start``/``end`` index into :attr:`ParsedDocument.body`; ``body[start:end]``
    is the block's exact text, so chunks can prove that no character was lost.
    """

    kind: BlockKind
    start: int
    end: int
    heading_path: tuple[str, ...]  # H1…H4 titles in force at this block (a heading includes itself)
    level: int = 0  # heading level (1–6) for HEADING blocks, else 0
    page: int | None = None  # 1-based PDF page, when known
    line: int = 0  # 1-based line in the source file where the block starts


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A file turned into text plus structure, before chunking."""

    source: str  # the file's path (as given to the parser; the sync layer makes it canonical)
    title: str
    body: str  # the text chunks are cut from (front matter removed for Markdown)
    blocks: tuple[Block, ...]
    metadata: dict[str, Any] = field(default_factory=dict)  # front matter, PDF info, …
    format: str = "markdown"  # markdown | text | html | pdf


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunker's output: a span of the body plus what it learned about it.

    ``text`` is ``body[start:end]`` (overlap included); the sync layer turns drafts
    into :class:`Chunk` rows with ids, hashes and document metadata.
    """

    text: str
    start: int
    end: int
    heading_path: tuple[str, ...]
    token_count: int
    has_code: bool = False
    has_equations: bool = False
    has_table: bool = False
    page: int | None = None


@dataclass(slots=True)
class Chunk:
    """One indexed unit: text, where it came from, and its metadata.

    ``id`` is stable: it depends on the tenant, the document and the chunk's
    content (not its position), so an edit elsewhere in a file keeps it.
    """

    id: str
    doc_id: str
    tenant: str
    source: str  # canonical path of the file
    title: str  # document title
    chapter: str  # top-level grouping (first folder under the ingest root, or H1)
    section: str  # innermost heading
    heading_path: tuple[str, ...]
    url: str  # link to the passage (file URL or base URL + anchor)
    anchor: str  # slug of the innermost heading
    chunk_index: int
    start_char: int
    end_char: int
    token_count: int
    word_count: int
    has_code: bool
    has_equations: bool
    content_hash: str  # sha256 of the embedded text: unchanged hash ⇒ vector reused
    created_at: str  # ISO 8601 UTC
    text: str
    page: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # front matter and format extras

    @property
    def embed_text(self) -> str:
        """What the embedder sees: the heading path gives every chunk its context."""
        parts = [self.title] if self.title else []
        parts += [h for h in self.heading_path if h and h != self.title]
        head = " > ".join(parts)
        return f"{head}\n{self.text}" if head else self.text


@dataclass(slots=True)
class DocumentRecord:
    """The index's note of one ingested file: what sync compares against."""

    doc_id: str
    tenant: str
    source: str
    file_hash: str
    chunk_count: int
    token_count: int
    chapter: str
    title: str
    format: str
    ingested_at: str


@dataclass(slots=True)
class Hit:
    """A retrieved chunk with the scores each stage gave it."""

    chunk: Chunk
    score: float  # the final ranking score (fused, reranked)
    rank: int = 0  # 1-based final rank
    vector_score: float | None = None  # cosine similarity to the query
    keyword_score: float | None = None  # BM25 score
    rerank_score: float | None = None
    expanded_from: str | None = None  # id of the hit this neighbour was added for

    def to_dict(self) -> dict[str, Any]:
        c = self.chunk
        return {
            "id": c.id,
            "rank": self.rank,
            "score": self.score,
            "vector_score": self.vector_score,
            "keyword_score": self.keyword_score,
            "rerank_score": self.rerank_score,
            "expanded_from": self.expanded_from,
            "doc_id": c.doc_id,
            "tenant": c.tenant,
            "source": c.source,
            "title": c.title,
            "chapter": c.chapter,
            "section": c.section,
            "heading_path": list(c.heading_path),
            "url": c.url,
            "chunk_index": c.chunk_index,
            "start_char": c.start_char,
            "end_char": c.end_char,
            "token_count": c.token_count,
            "has_code": c.has_code,
            "has_equations": c.has_equations,
            "page": c.page,
            "text": c.text,
        }


@dataclass(slots=True)
class SearchResult:
    """Ranked hits plus how long each stage took (milliseconds)."""

    query: str
    mode: str
    hits: list[Hit]
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "hits": [h.to_dict() for h in self.hits],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }
