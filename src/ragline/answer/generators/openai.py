"""A generator for any OpenAI-compatible chat endpoint (OpenAI, Groq, Ollama, vLLM,
llama.cpp server), streamed over server-sent events with httpx.

Failures before the first token are retried: 429, 408, 425 and 5xx answers and
network errors (timeouts included), with exponential backoff 1 s, 2 s, 4 s…
capped at 10 s and ±25 % jitter, or exactly the ``Retry-After`` the server
asks for (over 60 s fails instead: a reader should not stall). The rules are
:mod:`ragline.retry`'s, shared with the embedder. Other 4xx answers (a 400 is a
bad request: sending it again cannot help) fail at once. Once tokens have been
streamed a failure is not retried (the reader has seen them): it raises
:class:`GenerationError` and the answerer marks the partial answer incomplete.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from ragline.answer.generators.base import (
    Delta,
    GenerationDeadline,
    GenerationError,
    GenerationRequest,
)
from ragline.answer.generators.prompt import build_messages
from ragline.retry import RetryPolicy, error_message, is_retryable, parse_retry_after


def parse_sse_data(line: str) -> Any:
    """The JSON of an SSE ``data:`` line; ``"[DONE]"`` for the end marker; None for
    comments, other fields and blank keep-alive lines."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return "[DONE]"
    if not data:
        return None
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise GenerationError(
            f"malformed stream event from the LLM endpoint: {data[:200]!r}"
        ) from e


def _usage(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {k: int(v) for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}


def _field(obj: Any, key: str, kind: type) -> Any:
    """``obj[key]`` when ``obj`` is a dict and the value has the expected ``kind``, else
    that kind's empty value: a reply of the wrong shape reads as empty, never raises."""
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, kind) else kind()


class OpenAIGenerator:
    """Streams chat completions from ``{base_url}/chat/completions``.

    ``sleep`` and ``rand`` are injectable so tests check the retry schedule
    without waiting; ``transport`` lets an application share an httpx transport.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "",
        temperature: float = 0.3,
        max_tokens: int = 500,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        deadline_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("LLM_BASE_URL is empty: the openai generator needs an endpoint")
        if not model:
            raise ValueError("LLM_MODEL is empty: the openai generator needs a model name")
        if max_retries < 0:
            raise ValueError(f"LLM_MAX_RETRIES must be >= 0, got {max_retries}")
        url = base_url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else f"{url}/chat/completions"
        self._model = model
        self.api_key = api_key
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.policy = RetryPolicy(max_retries=max_retries, long_retry_after="fail")
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s
        self.sleep = sleep
        self.rand = rand
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)), transport=transport
        )

    @property
    def name(self) -> str:
        return "openai"

    @property
    def model(self) -> str:
        return self._model

    def close(self) -> None:
        self._client.close()

    def payload(self, request: GenerationRequest) -> dict[str, Any]:
        return {
            "model": self._model,
            "messages": build_messages(request),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = self.payload(request)
        end = None if self.deadline_s is None else time.monotonic() + self.deadline_s
        attempt = 0
        while True:
            started = False
            retry_after: float | None = None
            try:
                with self._client.stream(
                    "POST", self.url, json=body, headers=headers, timeout=self._timeout(end)
                ) as resp:
                    if resp.status_code == 200:
                        for delta in self._read(resp):
                            self._check(end)
                            started = started or bool(delta.text)
                            yield delta
                        return
                    message = error_message(resp.read()) or resp.reason_phrase
                    failure = f"LLM endpoint returned HTTP {resp.status_code}: {message}"
                    if not is_retryable(resp.status_code):
                        raise GenerationError(failure)
                    retry_after = parse_retry_after(resp.headers.get("retry-after"))
            except httpx.TransportError as e:
                self._check(end, slack=0.1)  # a read cut short by the deadline
                kind = "timed out" if isinstance(e, httpx.TimeoutException) else "failed"
                failure = f"request to the LLM endpoint {kind}: {type(e).__name__}: {e}"
                if started:
                    raise GenerationError(f"answer stream cut: {failure}") from e
            if attempt >= self.policy.max_retries:
                raise GenerationError(f"{failure} (after {attempt + 1} attempts)")
            delay = self.policy.delay(attempt, self.rand(), retry_after)
            if delay is None:  # a long Retry-After fails rather than stall the reader
                raise GenerationError(f"{failure}; server asks to retry after {retry_after:.0f} s")
            if end is not None and time.monotonic() + delay >= end:
                raise GenerationDeadline(f"{failure}; {self._late()}")
            self.sleep(delay)
            attempt += 1

    def _timeout(self, end: float | None) -> httpx.Timeout:
        """The per-read timeout, cut to what is left of the deadline (a hanging
        endpoint is given up on when the deadline passes, not a whole timeout later)."""
        left = self.timeout_s if end is None else max(0.001, end - time.monotonic())
        seconds = min(self.timeout_s, left)
        return httpx.Timeout(seconds, connect=min(10.0, seconds))

    def _late(self) -> str:
        return f"timed out: no whole answer within the {self.deadline_s:g} s generation deadline"

    def _check(self, end: float | None, slack: float = 0.0) -> None:
        """Raise :class:`GenerationDeadline` once the deadline has passed (a model that
        sends one token every 20 s never trips the per-read timeout)."""
        if end is not None and time.monotonic() + slack >= end:
            raise GenerationDeadline(self._late())

    def _read(self, resp: httpx.Response) -> Iterator[Delta]:
        """Deltas of one 200 response: an SSE stream, or one JSON body from a server
        that ignores ``stream``."""
        if resp.headers.get("content-type", "").startswith("application/json"):
            raw = resp.read()
            try:
                payload = json.loads(raw)
            except ValueError:
                raise GenerationError(
                    f"malformed reply from the LLM endpoint (HTTP 200, not JSON): {raw[:200]!r}"
                ) from None
            choices = _field(payload, "choices", list)
            message = _field(choices[0] if choices else None, "message", dict)
            if not message:
                raise GenerationError(
                    f"malformed reply from the LLM endpoint (no choices[0].message): {raw[:200]!r}"
                )
            text = _field(message, "content", str)
            yield Delta(text=text, usage=_usage(payload.get("usage")))
            return
        finished = False
        usage: dict[str, int] = {}
        for line in resp.iter_lines():
            event = parse_sse_data(line)
            if event is None:
                continue
            if event == "[DONE]":
                yield Delta(usage=usage)
                return
            if not isinstance(event, dict):
                continue
            if "error" in event:
                raise GenerationError(
                    f"LLM endpoint error in stream: {error_message(json.dumps(event).encode())}"
                )
            usage = _usage(event.get("usage")) or usage
            choices = event.get("choices") or []
            if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
                raise GenerationError(
                    f"malformed stream event from the LLM endpoint: {json.dumps(event)[:200]!r}"
                )
            for choice in choices:
                text = _field(_field(choice, "delta", dict), "content", str)
                if text:
                    yield Delta(text=text)
                finished = finished or bool(choice.get("finish_reason"))
        if not finished:
            raise GenerationError("answer stream cut: the LLM endpoint closed it before the end")
        yield Delta(usage=usage)
