"""The official openai client against /v1/chat/completions and /v1/models."""

from __future__ import annotations

import re

import httpx
from openai import OpenAI

from .conftest import LiveServer, sse_events


def client(server: LiveServer) -> OpenAI:
    return OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60)


def test_models_and_non_streaming_completion(docs_server: LiveServer) -> None:
    oai = client(docs_server)
    assert [m.id for m in oai.models.list().data] == ["ragline"]
    done = oai.chat.completions.create(
        model="ragline",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "How do I filter search results by chapter?"},
        ],
    )
    text = done.choices[0].message.content or ""
    assert re.search(r"\[\d+\]", text)
    assert done.choices[0].finish_reason == "stop"
    assert done.usage is not None and done.usage.total_tokens > 0
    citations = (done.model_extra or {})["citations"]
    assert citations and all(f"[{c['number']}]" in text for c in citations)
    assert all(c["source"]["number"] == c["number"] for c in citations)


def test_streaming_completion_carries_citations_on_the_last_chunk(docs_server: LiveServer) -> None:
    oai = client(docs_server)
    stream = oai.chat.completions.create(
        model="ragline",
        messages=[{"role": "user", "content": "What does the section chunker do with tables?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    parts, last_citations, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            parts.append(choice.delta.content or "")
            if choice.finish_reason == "stop":
                last_citations = (chunk.model_extra or {}).get("citations")
    text = "".join(parts)
    assert re.search(r"\[\d+\]", text)
    assert last_citations and usage is not None and usage.total_tokens > 0


def test_raw_stream_ends_with_done_and_bad_requests_get_400(docs_server: LiveServer) -> None:
    with httpx.Client(base_url=docs_server.url, timeout=60) as c:
        r = c.post(
            "/v1/chat/completions",
            json={"model": "x", "stream": True,
                  "messages": [{"role": "user", "content": "What is reciprocal rank fusion?"}]},
        )  # fmt: skip
        events = sse_events(r.text)
        assert events[-1][1] == "[DONE]"
        assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"
        r = c.post(
            "/v1/chat/completions",
            json={"model": "x", "messages": [{"role": "assistant", "content": "hello there"}]},
        )
        assert r.status_code == 400 and r.json()["field"] == "messages"  # no user message
        r = c.post("/v1/chat/completions", json={"model": "x", "messages": []})
        assert r.status_code == 400 and r.json()["field"] == "messages"
