"""What one running app shares across requests: the engine, its locks, and the stores
of the service (conversations, uploads, query log, keys, rate limiter, metrics).

Thread safety of the shared engine (one :class:`~ragline.engine.Ragline` per process):

* its parts are created lazily and without a lock, so :meth:`ServeState.warm` builds
  them all once at startup, before any request can race to build a second store;
* searches and answers then run side by side in worker threads: the LanceDB store
  serialises its own calls (an ``RLock``), the ONNX session is safe to call from
  several threads, the embedding cache and reranker lock themselves, and every
  answer gets its own citation tracker;
* ingests and deletes are serialised by :attr:`ServeState.write_lock` (one sync at a
  time; a sync records the model fingerprint and optimises the table);
* the local (llama.cpp) generator holds one model context that is not thread-safe,
  so with ``RAGLINE_GENERATOR=local`` answers are serialised by
  :attr:`ServeState.generate_lock`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ragline.answer.answerer import SearchOptions
from ragline.answer.context import CountTokens, build_context
from ragline.answer.generators.base import Delta, GenerationError, GenerationRequest
from ragline.engine import AnswerHooks, Ragline
from ragline.serve.auth import KeyStore
from ragline.serve.conversations import ConversationStore
from ragline.serve.documents import UploadRegistry
from ragline.serve.metrics import ServeMetrics
from ragline.serve.popular import PopularChunks
from ragline.serve.querylog import QueryLog, QueryLogRow, load_salt, make_query_log, new_row
from ragline.serve.ratelimit import RateLimiter, make_rate_limiter
from ragline.settings import Settings
from ragline.store.base import StoreError, check_model
from ragline.store.retrying import call_with_retry
from ragline.types import Answer, Confidence, SearchResult, Source, StreamEvent

log = logging.getLogger("ragline.serve")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the tenant every read and write is scoped to, and the client IP."""

    tenant: str
    ip: str


def new_query_id() -> str:
    return uuid.uuid4().hex


class LLMGate:
    """Counts the answers waiting on (or streaming from) the language model; past
    ``limit`` (0 = none) a request gets the extractive answer with a high-traffic
    notice at once instead of queueing behind the others."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting = 0
        self._lock = threading.Lock()

    def enter(self) -> bool:
        with self._lock:
            if self.limit and self.waiting >= self.limit:
                return False
            self.waiting += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.waiting -= 1


class Busy:
    """A generator standing in for the language model while the gate is full: it
    fails at once, so the answerer gives the extractive answer with the notice. Its
    name is no model's, so the follow-up rewriter does not call the model either."""

    def __init__(self, model: str, limit: int) -> None:
        self._model, self.limit = model, limit

    @property
    def name(self) -> str:
        return "busy"

    @property
    def model(self) -> str:
        return self._model

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        raise GenerationError(
            f"high traffic: {self.limit} answers are already waiting for the language model"
        )
        yield Delta()  # pragma: no cover - makes this a generator


class AnswerRun:
    """One answer in progress: its events, plus the numbered sources its citations
    point at (rebuilt from the same retrieval the answerer used, on first need).

    The answer is the engine's (:meth:`Ragline.ask_stream`, the pipeline the CLI
    runs); what a server changes is passed as hooks: its retrying search with the
    cached fallback, the caller's tenant, and the stand-in while the LLM is busy."""

    def __init__(self, state: ServeState, tenant: str) -> None:
        self._state = state
        self._result: SearchResult | None = None
        self._sources: dict[int, Source] | None = None
        generator = state.rag.answerer.generator
        self.count_tokens: CountTokens = state.rag.answerer.count_tokens
        #: Why the answer is degraded (the store was down), or None.
        self.degraded: str | None = None
        self._gated = generator.name != "extractive"
        self._hooks = AnswerHooks(search=self._search, tenant=tenant, on_retrieval=self._keep)
        busy = Busy(generator.model, state.llm_gate.limit)
        self._busy = replace(self._hooks, generator=busy)

    def _keep(self, result: SearchResult) -> None:
        """What the answer is built from (the phrasings' searches fused), for sources."""
        self._result = result

    def _search(self, query: str, **options: Any) -> SearchResult:
        """The engine's search, retried once; while the store cannot answer, the
        cached popular chunks (the answer is then marked low confidence)."""
        state = self._state
        try:
            result = state.search(query, **options)
        except StoreError as exc:
            k = options.get("top_k") or state.rag.settings.retrieval_top_k
            hits = state.popular.search(query, k, options.get("filters") or {})
            if not hits:
                raise
            log.warning("store unavailable (%s); answering from %d cached chunks", exc, len(hits))
            self.degraded = (
                f"the index is unavailable, so this answer comes from {len(hits)} "
                "often-retrieved passages kept in memory"
            )
            result = SearchResult(query, "cache", hits, {})
        return result

    @property
    def retrieved(self) -> int:
        """How many chunks the retrieval returned (0 before it ran, or for a greeting)."""
        return len(self._result.hits) if self._result is not None else 0

    def source(self, number: int) -> Source | None:
        """The context block ``[number]`` as a Source (the answer's own list, once done)."""
        if self._sources is None:
            if self._result is None:
                return None
            context = build_context(
                self._result.hits,
                self.count_tokens,
                self._state.rag.settings.max_context_tokens,
            )
            self._sources = {b.number: b.source() for b in context.blocks}
        return self._sources.get(number)

    def stream(
        self,
        question: str,
        history: list[dict[str, str]],
        selected_text: str | None,
        options: SearchOptions,
    ) -> Iterator[StreamEvent]:
        """The answerer's events (in a worker thread: every step may block)."""
        gate = self._state.llm_gate
        entered = self._gated and gate.enter()
        hooks = self._hooks if entered or not self._gated else self._busy
        try:
            lock = self._state.generate_lock
            with lock if lock is not None else contextlib.nullcontext():
                for event in self._state.rag.ask_stream(
                    question, history=history, selected_text=selected_text, hooks=hooks, **options
                ):
                    yield self._marked(event)
        finally:
            if entered:
                gate.leave()

    def _marked(self, event: StreamEvent) -> StreamEvent:
        """The final answer marked low confidence, with the reason, when degraded."""
        if self.degraded is None or event.type != "done" or event.answer is None:
            return event
        low = Confidence(score=event.answer.confidence.score, level="low", reason=self.degraded)
        return replace(event, answer=replace(event.answer, confidence=low))

    def answer(
        self,
        question: str,
        history: list[dict[str, str]],
        selected_text: str | None,
        options: SearchOptions,
    ) -> Answer:
        final: Answer | None = None
        for event in self.stream(question, history, selected_text, options):
            if event.type == "done":
                final = event.answer
        if final is None:  # the answerer always ends with done
            raise RuntimeError("the answer stream ended without a result")
        return final


class ServeState:
    """Everything an app's handlers share; one per app."""

    def __init__(self, settings: Settings, rag: Ragline) -> None:
        self.settings = settings
        self.rag = rag
        index_dir = rag.settings.index_dir
        self.metrics = ServeMetrics()
        self.limiter: RateLimiter = make_rate_limiter(settings)
        self.query_log: QueryLog = make_query_log(settings)
        self.salt = load_salt(settings) if settings.query_log_enabled else ""
        self.keys = KeyStore(settings) if settings.api_keys_enabled else None
        self.conversations = ConversationStore(index_dir / "conversations.sqlite3")
        self.uploads = UploadRegistry(index_dir / "uploads")
        self.write_lock = threading.Lock()
        self.generate_lock = threading.Lock() if rag.settings.generator == "local" else None
        self.llm_gate = LLMGate(settings.llm_max_waiting)
        self.popular = PopularChunks(settings.popular_chunks)
        self.warm_started = 0.0  # time.monotonic() of the last warm-up
        self.ready = False
        self.ready_error = ""
        #: The warm-up running in a worker thread (set by the app's lifespan).
        self.warm_task: asyncio.Task[None] | None = None

    def warm(self) -> None:
        """Build the engine's parts once (model, store, answerer) and check the model:
        the readiness probe passes only after this."""
        rag = self.rag
        self.ready_error = ""
        try:
            rag.embedder.embed_query("warm up")
            check_model(rag.store, rag.embedder.fingerprint)
            rag.store.info(None)
            _ = rag.answerer
            # The retriever (and its reranker) is built on the first search: do it
            # here, so concurrent first requests cannot each build (and load) one.
            rag.search("warm up", top_k=1)
        except Exception as exc:
            self.ready_error = f"{type(exc).__name__}: {exc}"
            log.error("ragline serve is not ready: %s", self.ready_error)
            raise
        self.ready = True

    def try_warm(self) -> None:
        """:meth:`warm` for a retry: a failure is recorded (``ready_error``), not raised."""
        with contextlib.suppress(Exception):
            self.warm()

    def search(self, query: str, **options: Any) -> SearchResult:
        """The engine's search with one retry on a store fault; a success feeds the
        popular-chunks cache."""
        s = self.settings
        result = call_with_retry(
            lambda: self.rag.search(query, **options),
            retries=s.store_retries,
            backoff_s=s.store_retry_backoff_s,
        )
        self.popular.record(result.hits)
        return result

    def log_row(self, row: QueryLogRow) -> None:
        """Write a query log row; a failure is counted and warned about, never raised."""
        try:
            ok = self.query_log.write(row)
        except Exception as exc:  # the contract says write never raises; be sure
            log.warning("query log write failed: %s", exc)
            ok = False
        if not ok:
            self.metrics.query_log_failures.inc()

    def start_row(
        self,
        caller: Caller,
        endpoint: str,
        question: str,
        query_id: str | None = None,
        *,
        session_id: str | None = None,
        conversation_id: str | None = None,
    ) -> QueryLogRow:
        return new_row(
            tenant=caller.tenant,
            endpoint=endpoint,
            ip=caller.ip,
            question=question,
            salt=self.salt,
            privacy=self.settings.query_log_privacy,
            query_id=query_id or new_query_id(),
            session_id=session_id,
            conversation_id=conversation_id,
        )

    def close(self) -> None:
        closers = (self.query_log.close, self.conversations.close, self.uploads.close)
        for closer in (*closers, self.metrics.close):
            try:
                closer()
            except Exception as exc:
                log.warning("closing %s failed: %s", closer, exc)
        close_limiter = getattr(self.limiter, "close", None)
        if callable(close_limiter):
            close_limiter()
        close_keys = getattr(self.keys, "close", None)
        if callable(close_keys):
            close_keys()
