"""OpenTelemetry traces of answers: one span per pipeline stage, laid out from the
durations the answerer and retriever already time (``Answer.timings_ms``), so tracing
adds no timer of its own and costs nothing when off.

Off by default and offline: ``opentelemetry`` (the ``otel`` extra) is imported lazily,
and spans are recorded only when a tracer provider is configured, either by the host
application (ragline then uses the global one, as a library should) or, for
``ragline serve``, by the standard ``OTEL_*`` variables (:func:`configure_from_env`).
Nothing is exported unless those variables name an exporter or an endpoint.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragline.types import Answer

log = logging.getLogger("ragline.tracing")

TRACER_NAME = "ragline"

#: The answer's stages in pipeline order: (key in ``Answer.timings_ms``, span name).
STAGES: tuple[tuple[str, str], ...] = (
    ("retrieve", "ragline.retrieve"),
    ("confidence", "ragline.confidence"),
    ("context", "ragline.context"),
    ("evidence", "ragline.judge"),
    ("generate", "ragline.generate"),
    ("verify", "ragline.verify"),
)
#: The retriever's candidate calls and later steps, in the order it runs them
#: (``retrieve.<key>``); a tuple ran concurrently (hybrid: vector and keyword together).
RETRIEVE_STEPS: tuple[tuple[str, ...], ...] = (
    ("embed",),
    ("vector", "keyword"),
    ("fusion",),
    ("threshold",),
    ("rerank",),
    ("expand",),
)

_provider: Any = None  # a TracerProvider set by use_provider / configure_from_env
_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class StageSpan:
    """One span's place: ``key`` names it among its siblings, ``parent`` is the key of
    the enclosing stage (None: the answer's root span)."""

    key: str
    name: str
    parent: str | None
    start_ns: int
    end_ns: int


def stage_layout(timings_ms: Mapping[str, float], start_ns: int) -> list[StageSpan]:
    """The stages of one answer laid end to end from ``start_ns``, each as long as it
    was timed; the retriever's steps inside ``retrieve``. A stage that did not run (no
    key, or 0 ms) has no span. Verification runs interleaved with generation (each
    streamed piece is checked as it comes); its span follows ``generate``'s."""
    out: list[StageSpan] = []
    cursor = start_ns
    for key, name in STAGES:
        ms = timings_ms.get(key)
        if ms is None:
            continue
        end = cursor + _ns(ms)
        out.append(StageSpan(key, name, None, cursor, end))
        if key == "retrieve":
            out.extend(_retrieve_steps(timings_ms, cursor))
        cursor = end
    return out


def _retrieve_steps(timings_ms: Mapping[str, float], start_ns: int) -> list[StageSpan]:
    out: list[StageSpan] = []
    cursor = start_ns
    for group in RETRIEVE_STEPS:
        longest = 0
        for step in group:
            ms = timings_ms.get(f"retrieve.{step}", 0.0)
            if ms <= 0:
                continue
            name = "ragline.rerank" if step == "rerank" else f"ragline.retrieve.{step}"
            out.append(StageSpan(step, name, "retrieve", cursor, cursor + _ns(ms)))
            longest = max(longest, _ns(ms))
        cursor += longest
    return out


def _ns(ms: float) -> int:
    return max(0, round(ms * 1_000_000))


def use_provider(provider: Any) -> None:
    """Send ragline's spans to ``provider`` (an SDK ``TracerProvider``; None: back to
    the global one). For tests and applications that keep their own provider."""
    global _provider
    with _lock:
        _provider = provider


def tracer() -> Any:
    """ragline's tracer, or None when OpenTelemetry is not installed. Without a
    configured provider it is the API's no-op tracer (spans that record nothing)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    provider = _provider
    if provider is not None:
        return provider.get_tracer(TRACER_NAME)
    return trace.get_tracer(TRACER_NAME)


def active() -> bool:
    """Whether spans would be recorded: OpenTelemetry installed and a provider set
    (ragline's own, or the host application's global one)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    if _provider is not None:
        return True
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces: an exporter named in
    ``OTEL_TRACES_EXPORTER`` (not ``none``) or an OTLP endpoint, and the SDK not
    disabled by ``OTEL_SDK_DISABLED=true``."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return bool(exporter) or bool(endpoint and endpoint.strip())


def configure_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """For ``ragline serve``: an SDK tracer provider exporting as the ``OTEL_*``
    variables say (``OTEL_TRACES_EXPORTER`` otlp or console; the OTLP exporter reads
    its endpoint, headers and protocol from ``OTEL_EXPORTER_OTLP_*`` itself; the
    service name from ``OTEL_SERVICE_NAME``, default ``ragline``). True when it made
    one (the caller then calls :func:`shutdown` at exit); a provider already set (by
    :func:`use_provider`) is kept, and False returned. When the variables
    ask for traces that cannot be made (the ``otel`` extra missing, an unknown
    exporter) the server runs without them and the log says why."""
    env = os.environ if environ is None else environ
    if _provider is not None or not wanted(env):
        return False
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_* variables ask for traces but OpenTelemetry is not installed: "
            "pip install -e '.[otel]'; serving without traces"
        )
        return False
    exporters = [
        x.strip().lower() for x in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if x.strip()
    ]
    attributes = {"service.name": env.get("OTEL_SERVICE_NAME", "").strip() or "ragline"}
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in exporters or ["otlp"]:
        exporter = _exporter(name, env)
        if exporter is None:
            return False
        provider.add_span_processor(BatchSpanProcessor(exporter))
    use_provider(provider)
    log.info("OpenTelemetry traces on (exporters: %s)", ", ".join(exporters or ["otlp"]))
    return True


def _exporter(name: str, env: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        log.warning(
            "OTEL_TRACES_EXPORTER=%s: ragline exports traces by otlp or console; "
            "serving without traces",
            name,
        )
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or ""
    ).strip() or "grpc"
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[no-redef]
                OTLPSpanExporter,
            )
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_PROTOCOL=%s: its OTLP exporter is not installed "
            "(the otel extra brings grpc); serving without traces",
            protocol,
        )
        return None
    return OTLPSpanExporter()


def shutdown() -> None:
    """Flush and stop the provider :func:`configure_from_env` made (at server exit),
    and go back to the global one."""
    provider = _provider
    use_provider(None)
    if provider is not None and hasattr(provider, "shutdown"):
        try:
            provider.shutdown()
        except Exception as exc:  # a collector gone at exit loses its last spans only
            log.warning("flushing traces failed: %s", exc)


def trace_answer(
    answer: Answer,
    *,
    name: str,
    attributes: Mapping[str, Any],
    started_ns: int,
    answered_ns: int,
    ended_ns: int,
    usage: Mapping[str, int] | None = None,
    retrieved: int | None = None,
    question: str | None = None,
) -> None:
    """The spans of one answered request: a root ``name`` from ``started_ns`` to
    ``ended_ns`` (the current span, if any, its parent) and a child per stage, the
    stages ending at ``answered_ns``. ``attributes`` (query id, tenant, endpoint; None
    values left out) go on every span; ``question``, passed only where the caller's privacy
    setting allows, on the root span alone."""
    t = tracer()
    if t is None:
        return
    common = {k: v for k, v in attributes.items() if v is not None}
    head = _root_attributes(answer, common)
    if question is not None:
        head["ragline.question"] = question
    root = t.start_span(name, start_time=started_ns, attributes=head)
    if not root.is_recording():
        root.end(end_time=ended_ns)
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    total = _ns(answer.timings_ms.get("total", 0.0))
    begin = max(started_ns, answered_ns - total)
    counts = _stage_attributes(answer, usage or {}, retrieved)
    made: dict[str, Any] = {}
    for stage in stage_layout(answer.timings_ms, begin):
        parent = root if stage.parent is None else made[stage.parent]
        span = t.start_span(
            stage.name,
            context=trace.set_span_in_context(parent),
            start_time=stage.start_ns,
            attributes={**common, **counts.get(stage.key, {})},
        )
        if stage.key == "generate":
            first = answer.timings_ms.get("first_token")
            if first is not None:
                span.add_event("first_token", timestamp=begin + _ns(first))
            if answer.error:
                span.set_status(Status(StatusCode.ERROR, answer.error))
        if stage.parent is None:
            made[stage.key] = span
        span.end(end_time=stage.end_ns)
    root.end(end_time=max(ended_ns, answered_ns))


def _root_attributes(answer: Answer, common: Mapping[str, Any]) -> dict[str, Any]:
    return {
        **common,
        "ragline.retrieval.mode": answer.retrieval_mode,
        "ragline.sources": len(answer.sources),
        "ragline.citations": len(answer.citations),
        "ragline.fallback": answer.fallback,
        "ragline.complete": answer.complete,
        "ragline.confidence.level": answer.confidence.level,
        "ragline.generator": answer.generator,
    }


def _stage_attributes(
    answer: Answer, usage: Mapping[str, int], retrieved: int | None
) -> dict[str, dict[str, Any]]:
    """The counts each stage span carries (never text)."""
    phrasings = max(1, len(answer.search_phrasings))
    retrieve: dict[str, Any] = {"ragline.phrasings": phrasings}
    if retrieved is not None:
        retrieve["ragline.retrieved"] = retrieved
    generate: dict[str, Any] = {
        "ragline.generator": answer.generator,
        "gen_ai.request.model": answer.model,
    }
    if "prompt_tokens" in usage:
        generate["gen_ai.usage.input_tokens"] = int(usage["prompt_tokens"])
    if "completion_tokens" in usage:
        generate["gen_ai.usage.output_tokens"] = int(usage["completion_tokens"])
    return {
        "retrieve": retrieve,
        "confidence": {
            "ragline.confidence.level": answer.confidence.level,
            "ragline.confidence.score": float(answer.confidence.score),
        },
        "context": {
            "ragline.context.blocks": len(answer.sources),
            "ragline.context.tokens": int(answer.usage.get("context_tokens", 0)),
        },
        "evidence": {"ragline.confidence.level": answer.confidence.level},
        "generate": generate,
        "verify": {
            "ragline.citations": len(answer.citations),
            "ragline.citations.unsupported": sum(1 for c in answer.citations if not c.supported),
            "ragline.citations.removed": len(answer.dropped_citations),
        },
    }
