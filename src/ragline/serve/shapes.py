"""Response bodies of the answer endpoints: ragline's answer plus the fields the
specifications name (seed 000's ``debug`` and citation fields, seed 003's
``relatedDocs``/``chunksRetrieved``, seed 004's source ``chapter``/``page``/
``confidence`` and ``response_time_ms``), added next to ragline's own so no
existing client breaks. Pure functions; docs/http-api.md has the table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ragline.types import Answer, Citation, Source


def _unit(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 4)


def source_out(src: Source) -> dict[str, Any]:
    c = src.hit.chunk
    score = src.hit.vector_score if src.hit.vector_score is not None else src.hit.score
    return {
        **src.to_dict(),
        "doc_id": c.doc_id,
        "chunk_index": c.chunk_index,
        "chapter": c.chapter,
        "page": c.page,
        "confidence": _unit(score),
    }


def citation_out(citation: Citation, src: Source | None) -> dict[str, Any]:
    """A citation with its block's document fields (``chunk_index`` only when the
    cited chunk is the block's own hit, not a merged neighbour)."""
    chunk = src.hit.chunk if src is not None else None
    same = chunk is not None and chunk.id == citation.chunk_id
    return {
        **citation.to_dict(),
        "doc_id": chunk.doc_id if chunk else "",
        "chunk_index": chunk.chunk_index if chunk and same else None,
        "chapter": chunk.chapter if chunk else "",
        "page": chunk.page if chunk else None,
        "snippet": citation.support_text,
        "score": src.hit.score if src is not None else None,
    }


def usage_of(answer: Answer, count: Callable[[str], int]) -> dict[str, int]:
    """Prompt, completion and total tokens: the generator's counts when it reports
    them; for the extractive generator, the context read (prompt) and the answer
    written (completion), counted with the engine's tokenizer."""
    u = answer.usage
    prompt = int(u.get("prompt_tokens") or u.get("context_tokens", 0))
    completion = int(u.get("completion_tokens") or (count(answer.text) if answer.text else 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": int(u.get("total_tokens") or prompt + completion),
    }


def related_docs(sources: list[Source]) -> list[dict[str, Any]]:
    """The documents behind the sources, once each, in rank order."""
    seen: dict[str, dict[str, Any]] = {}
    for src in sources:
        c = src.hit.chunk
        if c.doc_id not in seen:
            seen[c.doc_id] = {
                "doc_id": c.doc_id,
                "title": c.title,
                "chapter": c.chapter,
                "source": c.source,
                "url": c.url,
            }
    return list(seen.values())


def answer_body(
    answer: Answer,
    query_id: str,
    conversation_id: str | None,
    count: Callable[[str], int],
    *,
    retrieved: int,
    session_id: str | None = None,
) -> dict[str, Any]:
    """The JSON of an answer (``/api/query``, the ``done`` event of ``/api/chat``)."""
    body = answer.to_dict()
    by_number = {s.number: s for s in answer.sources}
    body["sources"] = [source_out(s) for s in answer.sources]
    body["citations"] = [citation_out(c, by_number.get(c.number)) for c in answer.citations]
    usage = usage_of(answer, count)
    t = answer.timings_ms
    total_ms = round(t.get("total", 0.0), 3)
    body["metadata"].update(
        query_id=query_id,
        conversation_id=conversation_id,
        session_id=session_id,
        total_tokens=usage["total_tokens"],
        chunks_retrieved=retrieved,
        chunksRetrieved=retrieved,
    )
    body["confidence_score"] = body["confidence"]["score"]
    body["debug"] = {
        "retrieval_ms": round(t.get("retrieve", 0.0), 3),
        "llm_ms": round(t.get("generate", 0.0), 3),
        "total_ms": total_ms,
        "model": answer.model,
        "chunks_retrieved": retrieved,
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
    }
    body["response_time_ms"] = round(total_ms)
    body["relatedDocs"] = related_docs(answer.sources)
    return body
