"""Concurrent query embeddings coalesced into shared model runs (dynamic batching).

A server embeds one query per search request, on several worker threads at once.
One model run's fixed cost is a large share of a short query's CPU (about 1.1 of
3–5 ms for all-MiniLM-L6-v2 on one core), so queries that arrive while a run is in
flight wait for it and then go together as the next run. A lone query runs at once:
nothing waits for company, so an idle server's latency is unchanged.

The thread that finds fewer than ``max_runs`` runs in flight (one by default: on 2
cores the other core serves the rest of the requests) runs its own query; when a
run ends, its thread hands the queries that queued meanwhile (up to ``max_batch``)
to the first of them, which runs them as the next batch. Each thread therefore runs
at most one batch and returns; a failed run's error is raised in every thread of
its batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ragline.embed.base import Embedder, EmbedderWrapper, Vectors


@runtime_checkable
class QueryBatchEmbedder(Protocol):
    """An embedder that can embed several queries in one call, as ``embed_query`` would."""

    def embed_queries(self, texts: Sequence[str]) -> Vectors: ...


class _Waiter:
    """One query's slot: its text, then its vector or error; ``batch`` set on the
    waiter chosen to run the next batch."""

    __slots__ = ("batch", "error", "ready", "text", "vector")

    def __init__(self, text: str) -> None:
        self.text = text
        self.ready = threading.Event()
        self.vector: Vectors | None = None
        self.error: BaseException | None = None
        self.batch: list[_Waiter] | None = None

    def result(self) -> Vectors:
        if self.error is not None:
            raise self.error
        assert self.vector is not None
        return self.vector


class CoalescingEmbedder(EmbedderWrapper):
    """An :class:`Embedder` whose concurrent ``embed_query`` calls share model runs.

    ``embed_many`` embeds a list of queries exactly as ``inner.embed_query`` embeds
    each (e.g. :meth:`OnnxEmbedder.embed_queries`); everything else is ``inner``'s.
    At most ``max_batch`` queries go in one call and at most ``max_runs`` calls run at
    once (each on the thread of one of its queries); a query that finds fewer in
    flight runs at once. Thread safe.
    """

    def __init__(
        self,
        inner: Embedder,
        embed_many: Callable[[list[str]], Vectors],
        max_batch: int,
        max_runs: int = 1,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_runs < 1:
            raise ValueError(f"max_runs must be >= 1, got {max_runs}")
        super().__init__(inner)
        self._embed_many = embed_many
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._max_runs = max_runs
        self._running = 0  # batches in flight
        self._queue: list[_Waiter] = []
        self._runs = 0
        self._queries = 0

    @property
    def inner(self) -> Embedder:
        return self._inner

    @property
    def max_batch(self) -> int:
        return self._max_batch

    @property
    def max_runs(self) -> int:
        return self._max_runs

    @property
    def stats(self) -> tuple[int, int]:
        """(batches run, queries embedded) so far: their ratio is the mean batch."""
        with self._lock:
            return self._runs, self._queries

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes a string, not {type(text).__name__}")
        me = _Waiter(text)
        with self._lock:
            if self._running >= self._max_runs:
                self._queue.append(me)
            else:
                self._running += 1
                me.batch = [me]
        if me.batch is None:
            try:
                self._wait(me)  # until a batch with this query ran, or this thread runs the next
            except BaseException:
                self._abandon(me)
                raise
            if me.batch is None:
                return me.result()
        self._run(me.batch)
        return me.result()

    def _wait(self, me: _Waiter) -> None:
        me.ready.wait()

    def _abandon(self, me: _Waiter) -> None:
        """A waiter interrupted (KeyboardInterrupt, a signal's exception) leaves the
        queue; if it was already chosen to run the next batch, it runs it first, so
        the queries behind it are never stranded."""
        with self._lock:
            if me in self._queue:
                self._queue.remove(me)
                return
        if me.batch is not None:
            self._run(me.batch)

    def _run(self, batch: list[_Waiter]) -> None:
        """Embed ``batch``, deliver each vector or the error, hand on the queue."""
        try:
            vectors = self._embed_many([w.text for w in batch])
            if vectors.shape[0] != len(batch):
                raise RuntimeError(
                    f"embed_many returned {vectors.shape[0]} vectors for {len(batch)} queries"
                )
            for w, v in zip(batch, vectors, strict=True):
                w.vector = np.asarray(v, dtype=np.float32)
        except BaseException as exc:  # every waiter gets it, then this thread re-raises it
            for w in batch:
                w.error = exc
        finally:
            with self._lock:
                self._runs += 1
                self._queries += len(batch)
                nxt = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
                if nxt:
                    nxt[0].batch = nxt
                else:
                    self._running -= 1
            for w in batch[1:]:
                w.ready.set()
            if nxt:
                nxt[0].ready.set()


def coalescing(embedder: Embedder, max_batch: int, max_runs: int = 1) -> Embedder:
    """``embedder`` with coalesced query embeddings when it can embed queries in one
    call and ``max_batch`` > 1; otherwise ``embedder`` itself."""
    if max_batch <= 1 or not isinstance(embedder, QueryBatchEmbedder):
        return embedder
    return CoalescingEmbedder(embedder, embedder.embed_queries, max_batch, max_runs)
