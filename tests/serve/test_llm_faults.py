"""The language model failing behind a real server, through a scripted
OpenAI-compatible endpoint on 127.0.0.1: a 429 that never clears gives the
extractive answer with a notice on every interface; a stream cut mid-answer sends
an ``error`` event and leaves the conversation marked incomplete; past
``LLM_MAX_WAITING`` waiting answers, the next one gets the high-traffic notice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .conftest import LiveServer, sse_events

QUESTION = "What does the section chunker do with tables?"
NOTICE = "The language model is busy"


def llm_server(
    serve: Callable[..., LiveServer], index: Path, url: str, **overrides: Any
) -> LiveServer:
    settings: dict[str, Any] = {
        "rate_limit_per_minute": 0, "generator": "openai", "llm_base_url": url,
        "llm_model": "scripted", "llm_max_retries": 1,
    }  # fmt: skip
    return serve(index, **{**settings, **overrides})


def test_429_forever_gives_the_extractive_answer_everywhere(
    docs_index: Path, serve: Callable[..., LiveServer], llm: tuple[str, Any]
) -> None:
    url, script = llm
    script.script = [("status", 429, {"retry-after": "0"}, "rate limited")] * 40
    live = llm_server(serve, docs_index, url)
    with live.client() as c:
        r = c.post("/api/query", json={"question": QUESTION})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["answer"].startswith(NOTICE) and body["citations"]
        meta = body["metadata"]
        assert meta["generator"] == "extractive" and meta["complete"] is True
        assert "429" in meta["error"]

        with c.stream("POST", "/api/chat", json={"message": QUESTION}) as s:
            events = sse_events("".join(s.iter_text()))
        names = [n for n, _ in events]
        assert "error" not in names and names[-1] == "done"
        assert events[-1][1]["answer"]["answer"].startswith(NOTICE)

        v1 = {"model": "ragline", "messages": [{"role": "user", "content": QUESTION}]}
        r = c.post("/v1/chat/completions", json=v1)
        assert r.status_code == 200
        assert r.json()["choices"][0]["message"]["content"].startswith(NOTICE)
        r = c.post("/v1/chat/completions", json={**v1, "stream": True})
        chunks = sse_events(r.text)
        assert chunks[-1][1] == "[DONE]" and not any("error" in d for _, d in chunks[:-1])
        text = "".join(d["choices"][0]["delta"].get("content", "") for _, d in chunks[:-1]
                       if isinstance(d, dict) and d.get("choices"))  # fmt: skip
        assert text.startswith(NOTICE)
    assert len(script.requests) == 8  # 4 answers × (1 try + 1 retry): the retries ran


def test_cut_stream_marks_the_conversation_incomplete(
    docs_index: Path, serve: Callable[..., LiveServer], llm: tuple[str, Any]
) -> None:
    url, script = llm
    script.script = [("stream", ["The section chunker", " keeps tables whole"], "cut")]
    live = llm_server(serve, docs_index, url, llm_max_retries=0)
    with live.client() as c:
        with c.stream("POST", "/api/chat", json={"question": QUESTION}) as s:
            events = sse_events("".join(s.iter_text()))
        names = [n for n, _ in events]
        assert "error" in names and names.count("token") == 2
        error = next(d for n, d in events if n == "error")
        assert error["incomplete"] is True and "cut" in error["message"]
        conversation_id = error["conversation_id"]
        detail = c.get(f"/api/conversations/{conversation_id}").json()
    stored = detail["history"][-1]
    assert stored["role"] == "assistant" and stored["answer"]["incomplete"] is True
    assert stored["content"] == "The section chunker keeps tables whole"


def test_past_the_waiting_limit_the_answer_says_high_traffic(
    docs_index: Path, serve: Callable[..., LiveServer], llm: tuple[str, Any]
) -> None:
    url, script = llm
    script.script = [("sleep", 8.0)]  # the first answer holds the only place
    live = llm_server(serve, docs_index, url, llm_max_waiting=1)
    first: dict[str, Any] = {}

    def slow() -> None:
        with live.client() as c:
            first["r"] = c.post("/api/query", json={"question": QUESTION})

    thread = threading.Thread(target=slow)
    thread.start()
    deadline = time.monotonic() + 10
    while not script.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert script.requests, "the first answer never reached the LLM"
    with live.client() as c:
        r = c.post("/api/query", json={"question": QUESTION})
    # Not queued behind the first: its answer arrives while the first still waits for
    # the LLM (an order, not a timing, so a busy machine cannot fail it).
    queued_behind = not thread.is_alive()
    thread.join(timeout=30)
    assert r.status_code == 200
    assert "high traffic" in r.json()["answer"] and not queued_behind
    assert first["r"].json()["answer"] == "late" or "late" in first["r"].json()["answer"]
    assert len(script.requests) == 1


def test_a_malformed_llm_reply_gives_the_extractive_answer(
    docs_index: Path, serve: Callable[..., LiveServer], llm: tuple[str, Any]
) -> None:
    """A 200 whose body is not JSON (it was a 400 blaming the request) or is JSON of
    the wrong shape (a 500), on the plain and the streamed path: the client gets the
    extractive answer with a notice, and the metadata says what went wrong."""
    url, script = llm
    replies = [
        ("raw", 200, "application/json", b"<html>502 Bad Gateway</html>"),
        ("raw", 200, "application/json", b'{"choices": "none"}'),
        ("raw", 200, "application/json", b"[1, 2, 3]"),
        ("raw", 200, "text/event-stream", b'data: {"choices": [7]}\n\n'),
    ]
    script.script = [*replies, *replies]
    live = llm_server(serve, docs_index, url, llm_max_retries=0)
    with live.client() as c:
        for _ in replies:
            r = c.post("/api/query", json={"question": QUESTION})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["answer"].startswith("The language model is busy (its reply could not")
            assert body["citations"] and body["metadata"]["generator"] == "extractive"
            assert "malformed" in body["metadata"]["error"]
        for _ in replies:
            with c.stream("POST", "/api/chat", json={"message": QUESTION}) as s:
                assert s.status_code == 200
                events = sse_events("".join(s.iter_text()))
            names = [n for n, _ in events]
            assert "error" not in names and names[-1] == "done", events
            assert events[-1][1]["answer"]["answer"].startswith(NOTICE)


def test_the_generation_deadline_gives_the_extractive_answer(
    docs_index: Path, serve: Callable[..., LiveServer], llm: tuple[str, Any]
) -> None:
    """An endpoint that hangs (the per-request timeout is 60 s) and one that sends a
    token a second (never tripping that timeout): past ``llm_deadline_s`` the client
    gets the extractive answer with the notice, plain and streamed (the ``done``
    event's answer replaces the tokens streamed before the deadline)."""
    url, script = llm
    hang = ("sleep", 15)
    drip = ("drip", ["The section", " chunker", " keeps", " tables", " whole"], 1.0)
    script.script = [hang, drip, hang, drip]
    live = llm_server(serve, docs_index, url, llm_deadline_s=2.5, llm_timeout_s=60)
    late = "The language model is busy (it did not answer in time)"
    with live.client() as c:
        for _ in (hang, drip):
            r = c.post("/api/query", json={"question": QUESTION})
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["answer"].startswith(late) and body["citations"]
            meta = body["metadata"]
            assert meta["generator"] == "extractive" and meta["complete"] is True
            assert "2.5 s generation deadline" in meta["error"]
        for _ in (hang, drip):
            with c.stream("POST", "/api/chat", json={"message": QUESTION}) as s:
                events = sse_events("".join(s.iter_text()))
            names = [n for n, _ in events]
            assert "error" not in names and names[-1] == "done", events
            final = events[-1][1]["answer"]
            assert final["answer"].startswith(late) and "chunker keeps" not in final["answer"]
