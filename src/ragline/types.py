"""Plain data passed between pipeline stages.

Every stage takes and returns these values, so a parser, chunker, store or
fusion function can be tested (and replaced) without the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: Metadata values a filter can match on (stores push these down as equality tests).
Scalar = str | int | float | bool
#: A metadata filter: ``{key: value}`` equality, or the JSON operator syntax of
#: :mod:`ragline.store.filter_ast` (``{"year": {"$gte": 2020}}``, ``$or``, …).
Filters = dict[str, Any]


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
    anchor: str = ""  # a heading's explicit id ({#id}, {/*id*/}); "" means slugify the title


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """A file turned into text plus structure, before chunking."""

    source: str  # the file's path (as given to the parser; the sync layer makes it canonical)
    title: str
    body: str  # the text chunks are cut from (front matter removed for Markdown)
    blocks: tuple[Block, ...]
    metadata: dict[str, Any] = field(default_factory=dict)  # front matter, PDF info, …
    format: str = "markdown"  # markdown, text, html, pdf, docx, pptx, xlsx, csv, epub, image


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunker's output: a span of the body plus what it learned about it.

    ``text`` is ``body[start:end]`` (overlap included); the sync layer turns drafts
    into :class:`Chunk` rows with ids, hashes and document metadata.

    One documented exception: when a table too big for one chunk is split at row
    boundaries, each later part repeats the table's header and separator rows so
    it still reads as a table. Then ``text == text[:prefix_len] + body[start:end]``
    where ``text[:prefix_len]`` is that repeated header (ending in ``"\n"``);
    ``prefix_len`` is 0 for every other chunk.
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
    prefix_len: int = 0  # leading chars of ``text`` not in body[start:end] (table header)


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
        return embed_head(self.title, self.heading_path) + self.text


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
            "language": c.metadata.get("language", ""),
            "text": c.text,
        }


@dataclass(slots=True)
class SearchResult:
    """Ranked hits plus how long each stage took (milliseconds)."""

    query: str
    mode: str
    hits: list[Hit]
    timings_ms: dict[str, float] = field(default_factory=dict)
    language: str = ""  # the query's detected language (ISO 639-1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "mode": self.mode,
            "language": self.language,
            "hits": [h.to_dict() for h in self.hits],
            "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
        }


# --- answering -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Confidence:
    """How far an answer can be trusted, in a form a person can read.

    ``score`` is on the retrieval-cosine scale of the model in use (see
    :mod:`ragline.answer.confidence`); ``level`` is high / medium / low, and
    ``reason`` says why in words ("4 sources, top relevance 0.71").
    """

    score: float
    level: str  # "high" | "medium" | "low"
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"score": round(self.score, 4), "level": self.level, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Source:
    """One numbered context block the generator saw: ``[number]`` in the answer.

    ``hit`` is the retrieved hit the block is built around; ``chunk_ids`` lists it
    and the neighbours merged into it (document order).
    """

    number: int
    hit: Hit
    chunk_ids: tuple[str, ...]
    label: str  # "Title > Section", as shown to the generator

    def to_dict(self) -> dict[str, Any]:
        c = self.hit.chunk
        return {
            "number": self.number,
            "label": self.label,
            "chunk_id": c.id,
            "chunk_ids": list(self.chunk_ids),
            "title": c.title,
            "section": c.section,
            "heading_path": list(c.heading_path),
            "source": c.source,
            "url": c.url,
            "anchor": c.anchor,
            "score": self.hit.score,
            "vector_score": self.hit.vector_score,
            "rank": self.hit.rank,
        }


@dataclass(frozen=True, slots=True)
class Citation:
    """A citation in an answer, resolved to the chunk that backs it.

    ``start``/``end`` locate the marker in the answer text; ``support_start``/
    ``support_end`` locate the supporting sentence in ``Chunk.text`` of
    ``chunk_id`` (the block's hit or a merged neighbour). ``supported`` is the
    verifier's verdict on ``claim`` (the answer sentence) against that sentence.
    """

    number: int  # the context block, [number]
    marker: str  # as written: "[2]", "[Citation 2]", "[Title > Section]"
    start: int
    end: int
    chunk_id: str
    title: str
    section: str
    source: str
    url: str
    anchor: str
    claim: str
    support_start: int
    support_end: int
    support_text: str
    support_score: float
    supported: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "marker": self.marker,
            "span": [self.start, self.end],
            "chunk_id": self.chunk_id,
            "title": self.title,
            "section": self.section,
            "source": self.source,
            "url": self.url,
            "anchor": self.anchor,
            "claim": self.claim,
            "support_span": [self.support_start, self.support_end],
            "support_text": self.support_text,
            "support_score": round(self.support_score, 4),
            "supported": self.supported,
        }


@dataclass(slots=True)
class Answer:
    """A question's answer with its sources, resolved citations and confidence.

    ``complete`` is False when generation stopped early (a stream cut, an
    endpoint error): ``text`` then holds what arrived. ``fallback`` marks the
    "not enough information" answer, ``smalltalk`` a greeting's short reply.
    """

    question: str
    text: str
    citations: list[Citation]
    sources: list[Source]
    confidence: Confidence
    generator: str
    model: str
    fallback: bool = False
    smalltalk: bool = False
    complete: bool = True
    error: str | None = None
    suggestions: list[str] = field(default_factory=list)
    dropped_citations: list[str] = field(default_factory=list)  # markers naming no context block
    usage: dict[str, int] = field(default_factory=dict)  # prompt/completion/total tokens
    timings_ms: dict[str, float] = field(default_factory=dict)
    retrieval_mode: str = ""
    #: Answer sentences with a citation, none of whose citations is supported.
    unsupported_sentences: list[str] = field(default_factory=list)
    search_query: str = ""  # what was searched: the question, or a follow-up made self-contained
    query_rewrite: str = "none"  # how: none | carry-over | llm
    search_phrasings: list[str] = field(default_factory=list)  # multi-query: also searched
    query_expansion: str = "none"  # multi-query: none | llm | empty | failed
    query_expansion_error: str = ""  # why the LLM wrote no phrasings (failed)

    def to_dict(self) -> dict[str, Any]:
        """The response shape of ``ragline ask --json`` and ``POST /api/query``."""
        return {
            "answer": self.text,
            "sources": [s.to_dict() for s in self.sources],
            "citations": [c.to_dict() for c in self.citations],
            "confidence": self.confidence.to_dict(),
            "metadata": {
                "question": self.question,
                "generator": self.generator,
                "model": self.model,
                "fallback": self.fallback,
                "smalltalk": self.smalltalk,
                "complete": self.complete,
                "error": self.error,
                "suggestions": list(self.suggestions),
                "dropped_citations": list(self.dropped_citations),
                "unsupported_citations": sum(1 for c in self.citations if not c.supported),
                "usage": dict(self.usage),
                "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
                "retrieval_mode": self.retrieval_mode,
                "unsupported_sentences": list(self.unsupported_sentences),
                "search_query": self.search_query or self.question,
                "query_rewrite": self.query_rewrite,
                "search_phrasings": list(self.search_phrasings),
                "query_expansion": self.query_expansion,
                "query_expansion_error": self.query_expansion_error,
            },
        }


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a streamed answer: ``token`` (``text``), ``citation``
    (``citation``), ``error`` (``error``, then a ``done``) and ``done``
    (``answer``, the final :class:`Answer`)."""

    type: str  # "token" | "citation" | "error" | "done"
    text: str = ""
    citation: Citation | None = None
    answer: Answer | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.type == "token":
            return {"type": "token", "text": self.text}
        if self.type == "citation" and self.citation is not None:
            return {"type": "citation", "citation": self.citation.to_dict()}
        if self.type == "done" and self.answer is not None:
            return {"type": "done", **self.answer.to_dict()}
        return {"type": self.type, "error": self.error}


# -- search: what a query asks of a store and what fusion returns


@dataclass(frozen=True, slots=True)
class FieldBoosts:
    """BM25 weight per field: matches in titles and headings count for more."""

    title: float = 2.0
    headings: float = 1.5
    text: float = 1.0


@dataclass(frozen=True, slots=True)
class Scored:
    """One entry of a ranked list, known by id: the score this list ranks it by, and
    the cosine / BM25 score it carries (the fused result keeps the first of each)."""

    id: str
    score: float
    vector_score: float | None = None
    keyword_score: float | None = None


@dataclass(frozen=True, slots=True)
class Fused:
    """One entry of a fused ranking (``rank`` is 1-based)."""

    id: str
    score: float
    rank: int
    vector_score: float | None
    keyword_score: float | None


def embed_head(title: str, heading_path: Sequence[str]) -> str:
    """The line the embedder reads before a chunk's text (``Chunk.embed_text``): its
    title and heading path, so the chunker can leave room for it in the window."""
    parts = [title] if title else []
    parts += [h for h in heading_path if h and h != title]
    head = " > ".join(parts)
    return f"{head}\n" if head else ""
