"""CoalescingEmbedder: concurrent query embeddings share model runs, results unchanged."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.embed.base import Embedder, EmbeddingError, Vectors
from ragline.embed.coalesce import CoalescingEmbedder, QueryBatchEmbedder, coalescing
from ragline.embed.onnx import OnnxEmbedder
from ragline.engine import Ragline

QUERIES = [
    "what is a tensor",
    "how does the learning rate schedule change the gradient steps of adam",
    "dropout",
    "why do residual connections help very deep convolutional networks train",
    "softmax regression loss",
    "attention",
    "batch normalisation at inference time",
    "how are word embeddings trained with negative sampling in word2vec",
]


class Recorder:
    """Wraps a real embedder's ``embed_queries``: records batch sizes, can hold a run
    until released, and can fail chosen runs (fault injection)."""

    def __init__(self, embedder: OnnxEmbedder) -> None:
        self.embedder = embedder
        self.batches: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.started = threading.Event()
        self.fail_on: set[int] = set()

    def __call__(self, texts: list[str]) -> Vectors:
        run = len(self.batches)
        self.batches.append(list(texts))
        self.started.set()
        assert self.hold.wait(30)
        if run in self.fail_on:
            raise EmbeddingError(f"injected failure in run {run}")
        return self.embedder.embed_queries(texts)


def in_threads(fn: Callable[[str], Vectors], texts: list[str]) -> list[Vectors | BaseException]:
    out: list[Vectors | BaseException] = [RuntimeError("not run")] * len(texts)

    def one(i: int) -> None:
        try:
            out[i] = fn(texts[i])
        except BaseException as exc:
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a caller never returned (deadlock)"
    return out


def wait_queued(c: CoalescingEmbedder, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(c._queue) < n:
        assert time.monotonic() < deadline, f"{len(c._queue)} of {n} queries queued"
        time.sleep(0.005)


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder(threads=1)


def test_is_an_embedder_and_delegates(onnx: OnnxEmbedder) -> None:
    c = CoalescingEmbedder(onnx, onnx.embed_queries, 8)
    assert isinstance(c, Embedder)
    assert c.fingerprint == onnx.fingerprint
    assert c.dimension == onnx.dimension == 384
    assert c.count_tokens("a short query") == onnx.count_tokens("a short query")
    docs = ["one passage about tensors", "another about gradients"]
    np.testing.assert_array_equal(c.embed_documents(docs), onnx.embed_documents(docs))


def test_a_lone_query_runs_at_once_alone(onnx: OnnxEmbedder) -> None:
    rec = Recorder(onnx)
    c = CoalescingEmbedder(onnx, rec, 8)
    v = c.embed_query(QUERIES[1])
    assert rec.batches == [[QUERIES[1]]]
    np.testing.assert_allclose(v, onnx.embed_query(QUERIES[1]), atol=1e-6)
    assert v.shape == (384,) and v.dtype == np.float32


def test_queries_arriving_during_a_run_share_the_next(onnx: OnnxEmbedder) -> None:
    rec = Recorder(onnx)
    c = CoalescingEmbedder(onnx, rec, 8)
    rec.hold.clear()
    first = threading.Thread(target=c.embed_query, args=(QUERIES[0],))
    first.start()
    assert rec.started.wait(30)
    results: list[Vectors | BaseException] = []
    rest = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, QUERIES[1:])))
    rest.start()
    wait_queued(c, len(QUERIES) - 1)
    rec.hold.set()
    first.join(30)
    rest.join(60)
    assert [len(b) for b in rec.batches] == [1, len(QUERIES) - 1]
    assert c.stats == (2, len(QUERIES))
    for q, v in zip(QUERIES[1:], results, strict=True):
        assert isinstance(v, np.ndarray)
        np.testing.assert_allclose(v, onnx.embed_query(q), atol=1e-6)
    assert c._running == 0 and not c._queue


def test_max_batch_caps_each_run(onnx: OnnxEmbedder) -> None:
    rec = Recorder(onnx)
    c = CoalescingEmbedder(onnx, rec, 2)
    rec.hold.clear()
    first = threading.Thread(target=c.embed_query, args=(QUERIES[0],))
    first.start()
    assert rec.started.wait(30)
    results: list[Vectors | BaseException] = []
    rest = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, QUERIES[1:6])))
    rest.start()
    wait_queued(c, 5)
    rec.hold.set()
    first.join(30)
    rest.join(60)
    assert [len(b) for b in rec.batches] == [1, 2, 2, 1]
    assert all(isinstance(v, np.ndarray) for v in results)


def test_a_failed_run_fails_each_of_its_queries_and_nothing_after(onnx: OnnxEmbedder) -> None:
    rec = Recorder(onnx)
    rec.fail_on = {1}
    c = CoalescingEmbedder(onnx, rec, 8)
    rec.hold.clear()
    first_out: list[Vectors] = []
    first = threading.Thread(target=lambda: first_out.append(c.embed_query(QUERIES[0])))
    first.start()
    assert rec.started.wait(30)
    results: list[Vectors | BaseException] = []
    rest = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, QUERIES[1:4])))
    rest.start()
    wait_queued(c, 3)
    rec.hold.set()
    first.join(30)
    rest.join(60)
    assert len(first_out) == 1  # the run before the failing one is unaffected
    assert len(results) == 3
    for r in results:
        assert isinstance(r, EmbeddingError) and "injected failure in run 1" in str(r)
    # Nothing is left stuck: the next query runs at once.
    np.testing.assert_allclose(c.embed_query("dropout"), onnx.embed_query("dropout"), atol=1e-6)
    assert [len(b) for b in rec.batches] == [1, 3, 1]


def test_a_wrong_vector_count_is_an_error_for_every_waiter(onnx: OnnxEmbedder) -> None:
    c = CoalescingEmbedder(onnx, lambda texts: onnx.embed_queries(texts[:1]), 8)
    assert c.embed_query("alone").shape == (384,)
    gate = threading.Event()

    def short(texts: list[str]) -> Vectors:
        gate.wait(30)
        return onnx.embed_queries(texts[:1])

    c = CoalescingEmbedder(onnx, short, 8)
    first = threading.Thread(target=c.embed_query, args=("first",))
    first.start()
    results: list[Vectors | BaseException] = []
    rest = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, ["a", "b"])))
    rest.start()
    wait_queued(c, 2)
    gate.set()
    first.join(30)
    rest.join(60)
    assert all(isinstance(r, RuntimeError) and "1 vectors for 2" in str(r) for r in results)


def test_many_threads_get_their_own_vectors(onnx: OnnxEmbedder) -> None:
    runs: list[int] = []

    def counted(texts: list[str]) -> Vectors:
        runs.append(len(texts))
        return onnx.embed_queries(texts)

    c = CoalescingEmbedder(onnx, counted, 4)
    texts = [f"{q} {i}" for i in range(6) for q in QUERIES]
    got = in_threads(c.embed_query, texts)
    for t, v in zip(texts, got, strict=True):
        assert isinstance(v, np.ndarray)
        np.testing.assert_allclose(v, onnx.embed_query(t), atol=1e-6)
    assert sum(runs) == len(texts) and max(runs) <= 4


def test_coalescing_wraps_only_batch_capable_embedders(onnx: OnnxEmbedder) -> None:
    assert isinstance(onnx, QueryBatchEmbedder)
    wrapped = coalescing(onnx, 8)
    assert isinstance(wrapped, CoalescingEmbedder) and wrapped.inner is onnx
    assert coalescing(onnx, 1) is onnx

    class NoBatch:
        fingerprint = onnx.fingerprint
        dimension = 384

        def embed_documents(self, texts: list[str]) -> Vectors:
            return onnx.embed_documents(texts)

        def embed_query(self, text: str) -> Vectors:
            return onnx.embed_query(text)

        def count_tokens(self, text: str) -> int:
            return 0

    plain = NoBatch()
    assert coalescing(plain, 8) is plain


def test_invalid_arguments(onnx: OnnxEmbedder) -> None:
    with pytest.raises(ValueError, match="max_batch"):
        CoalescingEmbedder(onnx, onnx.embed_queries, 0)
    with pytest.raises(ValueError, match="max_runs"):
        CoalescingEmbedder(onnx, onnx.embed_queries, 4, max_runs=0)
    c = CoalescingEmbedder(onnx, onnx.embed_queries, 4)
    with pytest.raises(TypeError, match="string"):
        c.embed_query(3)  # type: ignore[arg-type]
    assert c._running == 0


def test_concurrent_searches_through_it_rank_as_before(
    make_rag: Callable[..., Ragline], tides: Path, embedder: Embedder
) -> None:
    """The engine with coalesced query embeddings, 8 searches at once, returns the
    hits and scores the plain embedder gives one search at a time."""
    rag = make_rag()
    rag.ingest(tides)
    queries = [
        "what causes tides",
        "spring tide",
        "the moon's gravity pulls the oceans toward it on the near side",
        "tidal range",
        "neap tides happen when the sun and moon are at right angles",
        "high water",
        "why are there two tides a day",
        "tide tables for harbours",
    ]
    alone = [rag.search(q, top_k=5).hits for q in queries]
    runs: list[int] = []
    assert isinstance(embedder, OnnxEmbedder)

    def counted(texts: list[str]) -> Vectors:
        runs.append(len(texts))
        return embedder.embed_queries(texts)

    shared = Ragline(rag.settings, embedder=CoalescingEmbedder(embedder, counted, 8))
    try:
        with ThreadPoolExecutor(8) as pool:
            together = list(pool.map(lambda q: shared.search(q, top_k=5).hits, queries * 3))
    finally:
        shared.close()
    assert sum(runs) == len(queries) * 3
    for i, hits in enumerate(together):
        want = alone[i % len(queries)]
        assert [h.chunk.id for h in hits] == [h.chunk.id for h in want]
        np.testing.assert_allclose([h.score for h in hits], [h.score for h in want], atol=1e-6)


class Interrupted(Exception):
    """Stands for a KeyboardInterrupt raised in a waiting thread."""


@pytest.mark.parametrize("chosen", [False, True])
def test_an_interrupted_waiter_strands_nobody(onnx: OnnxEmbedder, chosen: bool) -> None:
    """A queued waiter interrupted before its batch: it leaves the queue, the rest run.
    One interrupted after being chosen to run the next batch: it runs it first."""
    rec = Recorder(onnx)
    handed = threading.Event()

    class Flaky(CoalescingEmbedder):
        def _wait(self, me: Any) -> None:
            if me.text != "interrupted":
                return super()._wait(me)
            if chosen:  # wait to be handed the next batch, then fail
                assert me.ready.wait(30) and me.batch is not None
                handed.set()
            raise Interrupted

    c = Flaky(onnx, rec, 8)
    rec.hold.clear()
    first = threading.Thread(target=c.embed_query, args=("first",))
    first.start()
    assert rec.started.wait(30)
    texts = ["interrupted", "a", "b"]
    results: list[Vectors | BaseException] = []
    # "interrupted" queues first, so it is the one chosen to run the next batch
    lone = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, texts[:1])))
    lone.start()
    if chosen:
        wait_queued(c, 1)
    else:
        lone.join(30)  # it raised and left the queue at once
    rest = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, texts[1:])))
    rest.start()
    wait_queued(c, 3 if chosen else 2)
    rec.hold.set()
    for t in (first, lone, rest):
        t.join(60)
        assert not t.is_alive()
    assert sum(isinstance(r, Interrupted) for r in results) == 1
    vectors = [r for r in results if isinstance(r, np.ndarray)]
    assert len(vectors) == 2
    assert [len(b) for b in rec.batches] == ([1, 3] if chosen else [1, 2])
    assert handed.is_set() == chosen
    assert c._running == 0 and not c._queue


def test_max_runs_lets_that_many_run_at_once(onnx: OnnxEmbedder) -> None:
    rec = Recorder(onnx)
    c = CoalescingEmbedder(onnx, rec, 8, max_runs=2)
    rec.hold.clear()
    results: list[Vectors | BaseException] = []
    two = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, QUERIES[:2])))
    two.start()
    deadline = time.monotonic() + 30
    while len(rec.batches) < 2:  # both started, neither waiting for the other
        assert time.monotonic() < deadline
        time.sleep(0.005)
    rest = threading.Thread(target=lambda: results.extend(in_threads(c.embed_query, QUERIES[2:])))
    rest.start()
    wait_queued(c, len(QUERIES) - 2)
    rec.hold.set()
    two.join(60)
    rest.join(60)
    assert [len(b) for b in rec.batches[:2]] == [1, 1]
    assert sum(len(b) for b in rec.batches) == len(QUERIES)
    assert all(isinstance(r, np.ndarray) for r in results)
    assert c._running == 0 and not c._queue
