"""Each specification's own example request bodies (as written in the seed documents)
posted to a real server, and each field the seed reads checked in the response.

Seed 000 writes no HTTP body (only a question); 002 posts ``{session_id, message,
selected_text, conversation_id}`` to /api/chat; 003 posts ``{query}`` to /api/query;
004 posts ``{question, context, max_results}``. The corpus is the repository's docs/,
so each seed's own (off-corpus) question gets the fallback; a second, in-corpus
question in the same shape checks the citation fields."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline.settings import Settings

from .conftest import LiveServer, sse_events

IN_CORPUS = "What does the section chunker do with tables?"

SEED_000 = {"question": "What was the company's revenue in 2024?"}
SEED_002 = {
    "session_id": "550e8400-e29b-41d4-a716-446655440000",
    "message": "How do I calculate inverse kinematics for a 6-DOF robot arm?",
    "selected_text": None,
    "conversation_id": None,
}
SEED_003 = {"query": "How do I set up authentication?"}
SEED_004 = {
    "question": "What is Physical AI?",
    "context": "optional selected text",
    "max_results": 5,
}

DEBUG_000 = {"retrieval_ms", "llm_ms", "total_ms", "model", "chunks_retrieved"}
CITATION_000 = {"doc_id", "title", "chunk_id", "snippet", "score", "chunk_index"}
SOURCE_004 = {"chapter", "section", "page", "confidence", "chunk_id"}


def post_json(live: LiveServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    with live.client() as c:
        r = c.post(path, json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def chat(live: LiveServer, body: dict[str, Any]) -> list[tuple[str, Any]]:
    with live.client() as c, c.stream("POST", "/api/chat", json=body) as r:
        assert r.status_code == 200, r.read()
        return sse_events("".join(r.iter_text()))


def test_seed_000_answer_debug_and_citations(docs_server: LiveServer) -> None:
    fallback = post_json(docs_server, "/api/query", SEED_000)
    assert fallback["citations"] == [] and fallback["metadata"]["fallback"] is True
    assert fallback["confidence_score"] == fallback["confidence"]["score"]
    for body in (fallback, post_json(docs_server, "/api/query", {"question": IN_CORPUS})):
        debug = body["debug"]
        assert set(debug) >= DEBUG_000 | {"prompt_tokens", "completion_tokens"}
        assert debug["total_ms"] >= debug["retrieval_ms"] > 0
        assert debug["chunks_retrieved"] == body["metadata"]["chunks_retrieved"]
    assert body["debug"]["llm_ms"] > 0 and body["debug"]["chunks_retrieved"] >= len(body["sources"])
    assert body["citations"]
    for cit in body["citations"]:
        assert set(cit) >= CITATION_000
        assert cit["snippet"] and cit["score"] > 0
        assert any(s["doc_id"] == cit["doc_id"] for s in body["sources"])
    tokens = body["debug"]["prompt_tokens"] + body["debug"]["completion_tokens"]
    assert body["metadata"]["total_tokens"] == tokens  # extractive: context read + written


def test_seed_002_chat_body_and_events(docs_server: LiveServer) -> None:
    events = chat(docs_server, SEED_002)
    names = [name for name, _ in events]
    assert names[-1] == "done" and "token" in names
    for name, data in events:
        if name == "token":
            assert data["token"] == data["text"] and data["token"]
    done = events[-1][1]
    assert set(done) >= {"conversation_id", "message_id", "total_tokens", "latency_ms"}
    assert done["answer"]["metadata"]["session_id"] == SEED_002["session_id"]

    events = chat(docs_server, {**SEED_002, "message": IN_CORPUS, "selected_text": "tables"})
    citations = [data for name, data in events if name == "citation"]
    assert citations
    for cit in citations:
        assert set(cit) >= {"chunk_id", "chapter", "section", "url"} and cit["chapter"]
    sources = events[-1][1]["answer"]["sources"]
    assert all({"chapter", "page"} <= set(s) for s in sources)
    # the same conversation continues under the seed's field names
    conversation_id = events[-1][1]["conversation_id"]
    again = chat(docs_server, {**SEED_002, "conversation_id": conversation_id})
    assert again[-1][1]["conversation_id"] == conversation_id


def test_seed_003_query_body(docs_server: LiveServer) -> None:
    body = post_json(docs_server, "/api/query", SEED_003)
    assert set(body) >= {"answer", "sources", "relatedDocs", "citations", "confidence", "metadata"}
    assert body["confidence"]["level"] in {"high", "medium", "low"}
    meta = body["metadata"]
    assert meta["chunksRetrieved"] == meta["chunks_retrieved"] and "model" in meta
    body = post_json(docs_server, "/api/query", {"query": IN_CORPUS})
    docs = {d["doc_id"] for d in body["relatedDocs"]}
    assert docs == {s["doc_id"] for s in body["sources"]} and docs


def test_seed_004_query_body(docs_server: LiveServer) -> None:
    body = post_json(docs_server, "/api/query", SEED_004)
    assert set(body) >= {"answer", "sources", "confidence", "response_time_ms"}
    assert isinstance(body["response_time_ms"], int) and body["response_time_ms"] >= 0
    assert isinstance(body["confidence_score"], float)
    body = post_json(docs_server, "/api/query", {**SEED_004, "question": IN_CORPUS})
    assert body["sources"] and len(body["sources"]) <= 5
    for src in body["sources"]:
        assert set(src) >= SOURCE_004
        assert 0.0 <= src["confidence"] <= 1.0 and src["chapter"]


def test_aliases_name_their_own_field(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        r = c.post("/api/query", json={"query": "a"})
        assert r.status_code == 400 and r.json()["field"] == "query"
        r = c.post("/api/chat", json={"message": "what is rrf?", "selected_text": "x " * 3000})
        assert r.status_code == 400 and r.json()["field"] == "selected_text"


def test_seed_004_rate_limit_body(
    docs_index: Path, serve: Callable[..., LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATE_LIMIT_PER_MINUTE", "1")  # the name docs/http-api.md gives
    assert Settings().rate_limit_per_minute == 1
    live = serve(docs_index, rate_limit_per_minute=1)
    with live.client() as c:
        assert c.post("/api/query", json=SEED_004).status_code == 200
        r = c.post("/api/query", json=SEED_004)
    assert r.status_code == 429
    body = r.json()
    assert set(body) >= {"error", "message", "status_code", "retry_after"}
    assert body["retry_after"] == int(r.headers["Retry-After"]) > 0
