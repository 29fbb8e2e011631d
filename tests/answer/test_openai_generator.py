"""The OpenAI-compatible generator against a real HTTP server on 127.0.0.1.

The server (tests/answer/conftest.py) streams SSE, answers 429 with Retry-After,
500, 400, stalls past the timeout and cuts a stream mid-answer. A recording
``sleep`` replaces waiting, so the retry schedule is checked exactly.
"""

from __future__ import annotations

from typing import Any

import pytest

from ragline.answer.context import Context
from ragline.answer.generators.base import GenerationError, GenerationRequest, Message
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.answer.generators.prompt import FALLBACK_ANSWER


def make(url: str, sleeps: list[float], **kw: Any) -> OpenAIGenerator:
    kw.setdefault("max_retries", 3)
    return OpenAIGenerator(
        url, "test-model", api_key="sk-test", sleep=sleeps.append, rand=lambda: 0.5, **kw
    )


def run(gen: OpenAIGenerator, request: GenerationRequest) -> tuple[str, dict[str, int]]:
    text, usage = "", {}
    for d in gen.generate(request):
        text += d.text
        usage.update(d.usage)
    return text, usage


@pytest.fixture
def request_(topic_context: Context) -> GenerationRequest:
    return GenerationRequest(
        "What does the forget gate do?",
        topic_context,
        history=(
            Message("user", "Tell me about LSTMs."),
            Message("assistant", "They have gates [4]."),
        ),
        selected_text="forget gate",
    )


def test_streams_tokens_and_sends_the_prompt(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("stream", ["The forget gate ", "decides what is kept ", "[4]."], "done")]
    sleeps: list[float] = []
    gen = make(url, sleeps)
    deltas = [d.text for d in gen.generate(request_) if d.text]
    assert deltas == ["The forget gate ", "decides what is kept ", "[4]."]
    (req,) = llm.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    body = req["body"]
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["temperature"] == 0.3 and body["max_tokens"] == 500
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    system, last = body["messages"][0]["content"], body["messages"][-1]["content"]
    assert "cite" in system and FALLBACK_ANSWER in system
    assert "[1] Dropout > Regularization" in last and "[5] Data > Broadcasting" in last
    assert "forget gate" in last and last.endswith("Question: What does the forget gate do?")
    assert sleeps == []


def test_usage_is_reported(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("stream", ["a", "b"], "done")]
    assert run(make(url, []), request_) == (
        "ab",
        {"prompt_tokens": 120, "completion_tokens": 2, "total_tokens": 122},
    )


def test_429_waits_exactly_retry_after(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("status", 429, {"Retry-After": "7"}, "slow down"), ("stream", ["ok"], "done")]
    sleeps: list[float] = []
    assert run(make(url, sleeps), request_)[0] == "ok"
    assert sleeps == [7.0] and len(llm.requests) == 2


def test_a_retry_after_over_60_s_fails_instead_of_stalling(
    llm_server: Any, request_: GenerationRequest
) -> None:
    url, llm = llm_server
    llm.script = [("status", 429, {"Retry-After": "3600"}, "quota"), ("stream", ["ok"], "done")]
    sleeps: list[float] = []
    with pytest.raises(GenerationError, match="HTTP 429: quota; server asks to retry after 3600 s"):
        run(make(url, sleeps), request_)
    assert sleeps == [] and len(llm.requests) == 1


def test_500_then_success_backs_off(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [
        ("status", 500, {}, "boom"),
        ("status", 503, {}, "busy"),
        ("stream", ["ok"], "done"),
    ]
    sleeps: list[float] = []
    assert run(make(url, sleeps), request_)[0] == "ok"
    assert sleeps == [1.0, 2.0]  # rand=0.5: no jitter


def test_400_is_not_retried(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("status", 400, {}, "bad request: unknown field")]
    sleeps: list[float] = []
    with pytest.raises(GenerationError, match="HTTP 400: bad request: unknown field"):
        run(make(url, sleeps), request_)
    assert sleeps == [] and len(llm.requests) == 1


def test_retries_give_up_after_max_retries(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("status", 502, {}, "bad gateway")] * 3
    sleeps: list[float] = []
    with pytest.raises(GenerationError, match=r"HTTP 502.*after 3 attempts"):
        run(make(url, sleeps, max_retries=2), request_)
    assert sleeps == [1.0, 2.0]


def test_timeout_is_retried_then_reported(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("sleep", 1.5), ("sleep", 1.5)]
    sleeps: list[float] = []
    with pytest.raises(GenerationError, match="timed out"):
        run(make(url, sleeps, max_retries=1, timeout_s=0.3), request_)
    assert sleeps == [1.0] and len(llm.requests) == 2


def test_timeout_then_success(llm_server: Any, request_: GenerationRequest) -> None:
    url, llm = llm_server
    llm.script = [("sleep", 1.5), ("stream", ["fine"], "done")]
    sleeps: list[float] = []
    assert run(make(url, sleeps, timeout_s=0.3), request_)[0] == "fine"
    assert sleeps == [1.0]


@pytest.mark.parametrize("end", ["cut", "eof"])
def test_stream_cut_mid_answer_is_an_error_after_the_partial_text(
    end: str, llm_server: Any, request_: GenerationRequest
) -> None:
    url, llm = llm_server
    llm.script = [("stream", ["The forget gate ", "decides"], end)]
    sleeps: list[float] = []
    got: list[str] = []
    with pytest.raises(GenerationError, match="stream cut"):
        for d in make(url, sleeps).generate(request_):
            got.append(d.text)
    assert "".join(got) == "The forget gate decides"
    assert sleeps == [] and len(llm.requests) == 1  # tokens were shown: never retried


def test_missing_endpoint_settings_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="LLM_BASE_URL"):
        OpenAIGenerator("", "m")
    with pytest.raises(ValueError, match="LLM_MODEL"):
        OpenAIGenerator("http://127.0.0.1:9", "")
