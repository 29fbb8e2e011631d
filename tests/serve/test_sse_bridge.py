"""The thread bridge behind SSE: items arrive as produced, and a consumer that stops
early makes the producer stop and close its iterator (generation ends)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from ragline.aio import iterate_in_thread
from ragline.serve.sse import format_event


def test_stopping_early_closes_the_producer() -> None:
    produced: list[int] = []
    closed = threading.Event()
    release = threading.Event()

    def slow() -> Iterator[int]:
        try:
            for i in range(1000):
                produced.append(i)
                yield i
                release.wait(timeout=0.01)
        finally:
            closed.set()

    async def consume() -> list[int]:
        got = []
        async for item in iterate_in_thread(slow):
            got.append(item)
            if len(got) == 3:
                break
        return got

    got = asyncio.run(consume())
    assert got == [0, 1, 2]
    assert closed.wait(timeout=5)
    assert len(produced) < 1000


def test_errors_in_the_thread_reach_the_consumer() -> None:
    def broken() -> Iterator[int]:
        yield 1
        raise ValueError("boom")

    async def consume() -> list[int]:
        return [i async for i in iterate_in_thread(broken)]

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(consume())


def test_event_data_cannot_inject_fields() -> None:
    raw = format_event("token", {"text": "a\n\nevent: done\ndata: x"}).decode()
    assert raw.count("\n\n") == 1 and raw.startswith("event: token\ndata: {")
