"""What the MCP tools return (pure): plain JSON-able dicts built from engine results.

The shapes follow the HTTP API's (:mod:`ragline.serve.schemas`), so a client that
knows one knows the other: an answer is ``Answer.to_dict()`` (answer, sources,
citations with their ``span`` in the answer and ``support_span`` in the chunk,
confidence), a hit is ``Hit.to_dict()``.
"""

from __future__ import annotations

from typing import Any

from ragline.types import Answer, Chunk, DocumentRecord, SearchResult


def search_payload(result: SearchResult, snippet_chars: int) -> dict[str, Any]:
    """Hits without their full text: ``snippet`` holds the first ``snippet_chars``
    (a search is for choosing; get_chunk returns the whole passage)."""
    hits = []
    for h in result.hits:
        d = h.to_dict()
        text = d.pop("text")
        d["snippet"] = text if len(text) <= snippet_chars else text[:snippet_chars] + "…"
        hits.append(d)
    return {"query": result.query, "mode": result.mode, "hits": hits}


def ask_payload(answer: Answer) -> dict[str, Any]:
    body = answer.to_dict()
    body["metadata"].pop("timings_ms", None)
    return body


def chunk_payload(chunk: Chunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.id,
        "doc_id": chunk.doc_id,
        "source": chunk.source,
        "url": chunk.url,
        "title": chunk.title,
        "chapter": chunk.chapter,
        "section": chunk.section,
        "heading_path": list(chunk.heading_path),
        "chunk_index": chunk.chunk_index,
        "start_char": chunk.start_char,
        "end_char": chunk.end_char,
        "page": chunk.page,
        "token_count": chunk.token_count,
        "text": chunk.text,
    }


def document_payload(rec: DocumentRecord, chunks: list[Chunk]) -> dict[str, Any]:
    """A document's record and its outline (one line per chunk, no text)."""
    return {
        "doc_id": rec.doc_id,
        "source": rec.source,
        "title": rec.title,
        "chapter": rec.chapter,
        "format": rec.format,
        "chunk_count": rec.chunk_count,
        "token_count": rec.token_count,
        "ingested_at": rec.ingested_at,
        "chunks": [
            {
                "chunk_id": c.id,
                "chunk_index": c.chunk_index,
                "section": c.section,
                "heading_path": list(c.heading_path),
                "page": c.page,
                "token_count": c.token_count,
            }
            for c in chunks
        ],
    }
