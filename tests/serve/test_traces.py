"""A trace of one ``/api/query`` (and ``/api/chat``) through a real server: a span per
stage, with the query id, tenant and counts, the question only under full logging;
OpenTelemetry's in-memory exporter receives them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragline import tracing

from .conftest import LiveServer, sse_events

QUESTION = "How are deleted files removed from the index?"
STAGES = {
    "ragline.retrieve",
    "ragline.confidence",
    "ragline.context",
    "ragline.judge",
    "ragline.generate",
    "ragline.verify",
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        yield exporter
    finally:
        tracing.use_provider(None)
        provider.shutdown()


def by_name(found: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in found}


def ask(live: LiveServer) -> dict[str, Any]:
    with live.client() as c:
        r = c.post("/api/query", json={"question": QUESTION})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["metadata"]["fallback"] is False, body["text"]
    return body


def test_one_query_is_a_trace_of_its_stages(
    docs_index: Path, serve: Callable[..., LiveServer], spans: InMemorySpanExporter
) -> None:
    live = serve(docs_index, rate_limit_per_minute=0)
    assert live.settings.query_log_privacy  # the default
    body = ask(live)
    found = spans.get_finished_spans()
    names = by_name(found)
    assert len(found) >= 6
    assert set(names) >= STAGES, sorted(names)
    root = names["ragline /api/query"]
    assert root.parent is None
    trace_ids = {s.context.trace_id for s in found}
    assert trace_ids == {root.context.trace_id}
    query_id = body["metadata"]["query_id"]
    for span in found:
        attrs = dict(span.attributes or {})
        assert attrs["ragline.query_id"] == query_id, span.name
        assert attrs["ragline.tenant"] == "default"
        assert attrs["ragline.endpoint"] == "/api/query"
        assert QUESTION not in {str(v) for v in attrs.values()}, span.name
        assert "ragline.question" not in attrs
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    for name in STAGES:
        assert names[name].parent is not None
        assert names[name].parent.span_id == root.context.span_id
    # the retriever's candidate calls, under retrieve
    retrieve = names["ragline.retrieve"]
    calls = [s for s in found if s.parent and s.parent.span_id == retrieve.context.span_id]
    assert {"ragline.retrieve.embed", "ragline.retrieve.vector", "ragline.retrieve.keyword"} <= {
        s.name for s in calls
    }
    assert retrieve.attributes["ragline.retrieved"] == body["metadata"]["chunks_retrieved"] > 0
    generate = names["ragline.generate"].attributes
    assert generate["gen_ai.request.model"] == body["debug"]["model"]
    assert generate["gen_ai.usage.input_tokens"] == body["debug"]["prompt_tokens"] > 0
    assert generate["gen_ai.usage.output_tokens"] == body["debug"]["completion_tokens"] > 0
    assert names["ragline.verify"].attributes["ragline.citations"] == len(body["citations"]) > 0
    assert names["ragline.context"].attributes["ragline.context.blocks"] == len(body["sources"])
    assert root.attributes["ragline.sources"] == len(body["sources"])


def test_full_logging_puts_the_question_on_the_root_span(
    docs_index: Path, serve: Callable[..., LiveServer], spans: InMemorySpanExporter
) -> None:
    live = serve(docs_index, rate_limit_per_minute=0, query_log_privacy=False)
    ask(live)
    names = by_name(spans.get_finished_spans())
    assert names["ragline /api/query"].attributes["ragline.question"] == QUESTION
    assert "ragline.question" not in names["ragline.generate"].attributes


def test_a_streamed_answer_is_traced_too(
    docs_index: Path, serve: Callable[..., LiveServer], spans: InMemorySpanExporter
) -> None:
    live = serve(docs_index, rate_limit_per_minute=0)
    with live.client() as c, c.stream("POST", "/api/chat", json={"question": QUESTION}) as r:
        events = sse_events("".join(r.iter_text()))
    done = events[-1]
    assert done[0] == "done"
    names = by_name(spans.get_finished_spans())
    root = names["ragline /api/chat"]
    assert root.attributes["ragline.query_id"] == done[1]["query_id"]
    assert set(names) >= STAGES
    assert names["ragline.generate"].attributes["ragline.endpoint"] == "/api/chat"


def test_no_spans_without_a_configured_provider(
    docs_index: Path, serve: Callable[..., LiveServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off by default: with no OTEL_* variable the app sets up no provider, and
    OpenTelemetry's global one is the API's proxy, so nothing is recorded or sent."""
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    live = serve(docs_index, rate_limit_per_minute=0)
    ask(live)
    assert tracing._provider is None
    assert not tracing.active()
