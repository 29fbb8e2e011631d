"""A trace of one ``/api/query`` (and ``/api/chat``) through a real server: a span per
stage, with the query id, tenant and counts, the question only under full logging;
OpenTelemetry's in-memory exporter receives them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
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


@pytest.mark.parametrize("stream", [False, True])
def test_openai_compatible_answers_are_traced(
    docs_index: Path, serve: Callable[..., LiveServer], spans: InMemorySpanExporter, stream: bool
) -> None:
    live = serve(docs_index, rate_limit_per_minute=0)
    body = {"model": "ragline", "messages": [{"role": "user", "content": QUESTION}]}
    with live.client() as c:
        r = c.post("/v1/chat/completions", json={**body, "stream": stream})
    assert r.status_code == 200, r.text
    names = by_name(spans.get_finished_spans())
    root = names["ragline /v1/chat/completions"]
    assert set(names) >= STAGES
    assert root.attributes["ragline.tenant"] == "default"
    assert len(str(root.attributes["ragline.query_id"])) == 32
    assert names["ragline.verify"].parent.span_id == root.context.span_id


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


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace collector on 127.0.0.1 that keeps what it receives."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, dict[str, Any]]] = []

    def Export(self, request: Any, context: Any) -> Any:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    attrs = {a.key: a.value for a in span.attributes}
                    self.spans.append((resource.get("service.name", ""), span.name, attrs))
        return trace_service_pb2.ExportTraceServiceResponse()


def test_ragline_serve_exports_to_the_otlp_endpoint_the_variables_name(
    docs_index: Path, tmp_path: Path
) -> None:
    """The real command with the standard variables: its trace reaches a collector."""
    collector = Collector()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, grpc_server)
    otlp_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "RAGLINE_QUERY_LOG_SALT": "s",
        "RAGLINE_RATE_LIMIT_PER_MINUTE": "0",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_SERVICE_NAME": "ragline-test",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "ragline", "serve", "--index", str(docs_index)]
    with log.open("wb") as sink:
        proc = subprocess.Popen([*cmd, "--port", str(port)], env=env, stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 180
        ready = False
        while not ready and time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                time.sleep(0.5)
        assert ready, log.read_text(errors="replace")[-2000:]
        r = httpx.post(f"{url}/api/query", json={"question": QUESTION}, timeout=120)
        assert r.status_code == 200, r.text
        query_id = r.json()["metadata"]["query_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            name == "ragline /api/query" for _, name, _ in collector.spans
        ):
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        grpc_server.stop(grace=None)
    names = {name for _, name, _ in collector.spans}
    assert names >= {"ragline /api/query", *STAGES}, log.read_text(errors="replace")[-2000:]
    assert {service for service, _, _ in collector.spans} == {"ragline-test"}
    for _, _, attrs in collector.spans:
        assert attrs["ragline.query_id"].string_value == query_id
        assert "ragline.question" not in attrs
