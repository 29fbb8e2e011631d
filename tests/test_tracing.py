"""ragline.tracing: the stage layout, the OTEL_* switch, and no-op without the extra."""

from __future__ import annotations

import itertools
import logging
import sys
import time

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragline import tracing
from ragline.types import Answer, Confidence

MS = 1_000_000


def test_stages_are_laid_end_to_end_with_the_candidate_calls_inside_retrieve() -> None:
    timings = {
        "retrieve": 10.0,
        "retrieve.embed": 2.0,
        "retrieve.vector": 3.0,
        "retrieve.keyword": 4.0,
        "retrieve.fusion": 1.0,
        "retrieve.threshold": 0.0,  # did not run: no span
        "retrieve.rerank": 2.5,
        "retrieve.total": 9.5,
        "confidence": 1.0,
        "context": 2.0,
        "evidence": 3.0,
        "first_token": 17.0,
        "generate": 5.0,
        "verify": 1.0,
        "total": 22.0,
    }
    spans = tracing.stage_layout(timings, 100 * MS)
    top = [s for s in spans if s.parent is None]
    assert [s.name for s in top] == [
        "ragline.retrieve",
        "ragline.confidence",
        "ragline.context",
        "ragline.judge",
        "ragline.generate",
        "ragline.verify",
    ]
    for before, after in itertools.pairwise(top):
        assert before.end_ns == after.start_ns
    assert top[0].start_ns == 100 * MS and top[-1].end_ns == 122 * MS
    inner = {s.name: s for s in spans if s.parent == "retrieve"}
    assert set(inner) == {
        "ragline.retrieve.embed",
        "ragline.retrieve.vector",
        "ragline.retrieve.keyword",
        "ragline.retrieve.fusion",
        "ragline.rerank",
    }
    vector, keyword = inner["ragline.retrieve.vector"], inner["ragline.retrieve.keyword"]
    assert vector.start_ns == keyword.start_ns == 102 * MS  # concurrent, after embedding
    assert inner["ragline.retrieve.fusion"].start_ns == keyword.end_ns == 106 * MS
    assert inner["ragline.rerank"].end_ns == 109_500_000


def test_a_greeting_has_no_stage_spans() -> None:
    assert tracing.stage_layout({"total": 0.4}, 0) == []


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "x"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4317"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, False),
    ],
)
def test_only_the_standard_variables_turn_traces_on(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


def test_configured_from_the_environment_and_shut_down() -> None:
    assert tracing.configure_from_env({}) is False
    assert tracing._provider is None
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SERVICE_NAME": "rag-a"}
    try:
        assert tracing.configure_from_env(env) is True
        provider = tracing._provider
        assert isinstance(provider, TracerProvider)
        assert provider.resource.attributes["service.name"] == "rag-a"
        assert tracing.active()
        assert tracing.configure_from_env(env) is False  # one provider per process
    finally:
        tracing.shutdown()
    assert tracing._provider is None and not tracing.active()


def test_an_exporter_it_cannot_make_is_reported_and_traces_stay_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ragline.tracing"):
        assert tracing.configure_from_env({"OTEL_TRACES_EXPORTER": "zipkin"}) is False
    assert "OTEL_TRACES_EXPORTER=zipkin" in caplog.text
    assert tracing._provider is None


def _answer() -> Answer:
    return Answer(
        question="q",
        text="t",
        citations=[],
        sources=[],
        confidence=Confidence(0.5, "medium", "r"),
        generator="extractive",
        model="",
        timings_ms={"retrieve": 1.0, "generate": 1.0, "total": 2.0},
    )


def test_without_opentelemetry_installed_tracing_is_a_no_op(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """ragline works without the otel extra: no tracer, nothing recorded, and OTEL_*
    variables asking for traces get a warning naming the extra."""
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    assert tracing.tracer() is None and not tracing.active()
    now = time.time_ns()
    tracing.trace_answer(
        _answer(), name="n", attributes={}, started_ns=now, answered_ns=now, ended_ns=now
    )
    with caplog.at_level(logging.WARNING, logger="ragline.tracing"):
        assert tracing.configure_from_env({"OTEL_TRACES_EXPORTER": "console"}) is False
    assert "[otel]" in caplog.text


def test_an_applications_own_provider_receives_the_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    try:
        now = time.time_ns()
        tracing.trace_answer(
            _answer(),
            name="ragline ask",
            attributes={"ragline.tenant": "t1", "ragline.query_id": None},
            started_ns=now - 5 * MS,
            answered_ns=now,
            ended_ns=now,
            question="what?",
        )
    finally:
        tracing.use_provider(None)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"ragline ask", "ragline.retrieve", "ragline.generate"}
    assert spans["ragline ask"].attributes["ragline.question"] == "what?"
    assert spans["ragline.generate"].attributes["ragline.tenant"] == "t1"
    assert "ragline.query_id" not in spans["ragline.generate"].attributes  # None is left out
    assert spans["ragline.retrieve"].start_time == now - 2 * MS
