"""Prometheus metrics of one app: a registry per app, so two apps in one process
(tests, embedding) never share or clash on counters.

With several worker processes (``ragline serve --workers N``) they are one registry:
prometheus_client's multiprocess mode, where each process writes its samples to files
in ``PROMETHEUS_MULTIPROC_DIR`` (the parent makes a temporary one) and a scrape of any
worker adds up every worker's files. Latencies are histograms in seconds
(``_seconds``, ``_bucket``): percentiles come from ``histogram_quantile`` over all
workers, which per-process percentile gauges could not give.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import values as _values
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ragline.store.base import MALFORMED_CHUNKS
from ragline.types import Answer

#: Seconds; answers take from a few milliseconds (extractive) to tens of seconds (LLMs).
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

CONTENT_TYPE = CONTENT_TYPE_LATEST
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The shared folder when this process writes its samples there: the variable set
    before prometheus_client was imported (it decides at import, once per process)."""
    folder = os.environ.get(MULTIPROC_ENV)
    return folder if folder and _values.ValueClass is not _values.MutexValue else None


class ServeMetrics:
    """Counters and histograms of requests, answers and the query log."""

    def __init__(self) -> None:
        #: Where the metrics are registered; scraped as it is by one process, or
        #: (multiprocess) never: the scrape reads every process's files instead.
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.shared_dir = multiprocess_dir()
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
            "of answers since the process started (the most any worker found); their "
            "ids are in the log.",
            registry=r,
            multiprocess_mode="livemax",
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
        # each worker keeps its own count current (a scrape may reach another worker)
        self.malformed_chunks.set(len(MALFORMED_CHUNKS.snapshot()))
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
        """The exposition: this app's registry, or every worker's samples summed."""
        self.malformed_chunks.set(len(MALFORMED_CHUNKS.snapshot()))
        if self.shared_dir is None:
            return generate_latest(self.registry)
        from prometheus_client import multiprocess

        scrape = CollectorRegistry()
        multiprocess.MultiProcessCollector(scrape, path=self.shared_dir)  # type: ignore[no-untyped-call]
        return generate_latest(scrape)

    def close(self) -> None:
        """At worker exit: its live gauges leave the sum (its counters stay counted)."""
        if self.shared_dir is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), self.shared_dir)  # type: ignore[no-untyped-call]
