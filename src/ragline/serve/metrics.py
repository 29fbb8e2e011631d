"""Prometheus metrics of one app: a registry per app, so two apps in one process
(tests, embedding) never share or clash on counters.

With several worker processes each has its own registry; scrape each worker or run
one worker per port (``--workers 1``) when exact totals matter.
"""

from __future__ import annotations

import threading
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ragline.latency import QUANTILES, quantiles
from ragline.store.base import MALFORMED_CHUNKS
from ragline.types import Answer

#: Seconds; answers take from a few milliseconds (extractive) to tens of seconds (LLMs).
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Recent samples per stage behind the p50/p95/p99 gauges (a sliding window).
QUANTILE_WINDOW = 1024


class ServeMetrics:
    """Counters and histograms of requests, answers and the query log."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "ragline_http_requests",
            "HTTP requests by route template, method and status code.",
            ["endpoint", "method", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "ragline_http_request_seconds",
            "Time to the response head (streams: to the first byte) by route template.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_seconds = Histogram(
            "ragline_stage_seconds",
            "Answer pipeline stage latency (retrieve, confidence, context, generate, "
            "verify, total; retrieve.* for the search stages).",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.first_token_seconds = Histogram(
            "ragline_llm_first_token_seconds",
            "Time from the question to the generator's first token, by endpoint.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_quantile_ms = Gauge(
            "ragline_stage_latency_ms",
            f"p50/p95/p99 of each answer stage over the last {QUANTILE_WINDOW} answers "
            "(milliseconds; first_token included).",
            ["stage", "quantile"],
            registry=r,
        )
        self._recent: dict[str, deque[float]] = {}
        self._recent_lock = threading.Lock()
        self.answers = Counter(
            "ragline_answers",
            "Answers by endpoint and outcome.",
            ["endpoint", "outcome"],
            registry=r,
        )
        self.fallbacks = Counter(
            "ragline_fallbacks",
            "Answers that were the 'not enough information' fallback.",
            registry=r,
        )
        self.citations = Counter("ragline_citations", "Citations emitted in answers.", registry=r)
        self.citations_removed = Counter(
            "ragline_citations_removed",
            "Citation markers removed from answers because they named no context block.",
            registry=r,
        )
        self.citations_unsupported = Counter(
            "ragline_citations_unsupported",
            "Citations the verifier found unsupported (flagged, or removed by policy).",
            registry=r,
        )
        self.rate_limited = Counter(
            "ragline_rate_limited", "Requests refused by the rate limiter.", registry=r
        )
        self.query_log_failures = Counter(
            "ragline_query_log_failures",
            "Query log rows that could not be written (the request was answered anyway).",
            registry=r,
        )
        self.malformed_chunks = Gauge(
            "ragline_malformed_chunks",
            "Stored chunks found malformed (a missing or wrong-typed field) and left out "
            "of answers since the process started; their ids are in the log.",
            registry=r,
        )
        self.stream_disconnects = Counter(
            "ragline_stream_disconnects",
            "Streams whose client went away before the end (generation was stopped).",
            registry=r,
        )

    def observe_answer(self, endpoint: str, answer: Answer) -> None:
        """Stage latencies, fallback and citation counts of one answer."""
        for stage, ms in answer.timings_ms.items():
            self.stage_seconds.labels(stage=stage).observe(max(ms, 0.0) / 1000.0)
        if "first_token" in answer.timings_ms:
            seconds = max(answer.timings_ms["first_token"], 0.0) / 1000.0
            self.first_token_seconds.labels(endpoint=endpoint).observe(seconds)
        with self._recent_lock:
            for stage, ms in answer.timings_ms.items():
                if "." not in stage:  # the answer's stages, not retrieve.* sub-stages
                    window = self._recent.setdefault(stage, deque(maxlen=QUANTILE_WINDOW))
                    window.append(ms)
        if answer.fallback:
            outcome = "fallback"
            self.fallbacks.inc()
        elif answer.smalltalk:
            outcome = "smalltalk"
        elif not answer.complete:
            outcome = "incomplete"
        else:
            outcome = "answered"
        self.answers.labels(endpoint=endpoint, outcome=outcome).inc()
        self.citations.inc(len(answer.citations))
        self.citations_removed.inc(len(answer.dropped_citations))
        self.citations_unsupported.inc(sum(1 for c in answer.citations if not c.supported))

    def render(self) -> bytes:
        self.malformed_chunks.set(len(MALFORMED_CHUNKS.snapshot()))
        with self._recent_lock:
            recent = {stage: list(values) for stage, values in self._recent.items()}
        for stage, values in recent.items():
            for name, ms in quantiles(values, QUANTILES).items():
                self.stage_quantile_ms.labels(stage=stage, quantile=name).set(ms)
        return generate_latest(self.registry)
