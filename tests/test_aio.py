"""AsyncRagline: the same pipeline awaited, calls overlapping (real index, real model)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline import AsyncRagline
from ragline.engine import Ragline
from ragline.errors import InputError


@pytest.fixture
def rag(make_rag: Callable[..., Ragline], tides: Path) -> Ragline:
    r = make_rag()
    r.ingest(tides)
    return r


def slow_store(rag: Ragline, seconds: float) -> list[tuple[float, float]]:
    """Make every candidate call of ``rag``'s store take ``seconds`` (as a remote store
    does); returns the list its (start, end) times are recorded in."""
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()
    store = rag.store
    real = store.candidates  # every search reads its candidates through this one call

    def slow(*args: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        time.sleep(seconds)
        out = real(*args, **kwargs)
        with lock:
            spans.append((t0, time.monotonic()))
        return out

    setattr(store, "candidates", slow)  # noqa: B010 — an instance attribute, not a method
    return spans


def test_two_searches_run_at_the_same_time(rag: Ragline) -> None:
    rag.search("tide")  # load the model and open the index before timing
    spans = slow_store(rag, 0.5)

    async def main() -> list[Any]:
        arag = AsyncRagline(rag=rag, max_workers=4)
        return await asyncio.gather(arag.search("spring tide"), arag.search("neap tide"))

    results = asyncio.run(main())
    assert all(r.hits for r in results)
    assert len(spans) >= 2
    (a0, a1), (b0, b1) = spans[0], spans[1]
    assert a0 < b1 and b0 < a1, f"the store calls did not overlap: {spans}"


def test_one_worker_runs_them_one_after_the_other(rag: Ragline) -> None:
    """The bound holds: the overlap above comes from the pool, not from chance."""
    rag.search("tide")
    spans = slow_store(rag, 0.3)

    async def main() -> None:
        arag = AsyncRagline(rag=rag, max_workers=1)
        await asyncio.gather(arag.search("spring tide"), arag.search("neap tide"))

    asyncio.run(main())
    (_, a1), (b0, _) = sorted(spans)[:2]
    assert b0 >= a1


def test_ask_gives_the_same_answer_as_the_sync_call(rag: Ragline) -> None:
    question = "What causes spring tides?"
    expected = rag.ask(question)

    async def main() -> Any:
        async with AsyncRagline(rag=rag) as arag:
            return await arag.ask(question)

    got = asyncio.run(main())
    assert got.text == expected.text
    assert [c.chunk_id for c in got.citations] == [c.chunk_id for c in expected.citations]


def test_the_stream_ends_with_done_and_stops_when_left_early(rag: Ragline) -> None:
    async def main() -> tuple[list[str], list[str]]:
        arag = AsyncRagline(rag=rag)
        kinds = [e.type async for e in arag.ask_stream("What causes spring tides?")]
        first: list[str] = []
        async for e in arag.ask_stream("What causes spring tides?"):
            first.append(e.type)
            break  # the consumer leaves: the producer must stop, the pool stay usable
        await arag.aclose()
        return kinds, first

    kinds, first = asyncio.run(main())
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert len(first) == 1


def test_errors_reach_the_caller(rag: Ragline) -> None:
    async def main() -> None:
        arag = AsyncRagline(rag=rag)
        await arag.search("tide", mode="nonsense")  # type: ignore[typeddict-item]

    with pytest.raises((InputError, ValueError)):
        asyncio.run(main())
