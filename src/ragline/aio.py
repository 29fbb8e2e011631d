"""ragline for asyncio applications (FastAPI, Starlette, aiohttp).

:class:`AsyncRagline` awaits the same pipeline as :class:`~ragline.engine.Ragline`: each
call runs on a worker thread of its own pool, so the event loop never blocks and calls
overlap where the work allows it (store and LLM I/O; the embedding and reader runs
release the GIL in onnxruntime; concurrent queries share the query-embedding batcher).
``ask_stream`` bridges the token stream to an async iterator and stops the producer when
the consumer leaves early.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, Unpack, cast

from ragline.answer.answerer import HistoryInput, SearchOptions
from ragline.engine import AnswerHooks, Ragline
from ragline.ingest.report import IngestReport
from ragline.settings import Settings
from ragline.types import Answer, SearchResult, StreamEvent

T = TypeVar("T")
_END = object()


class AsyncRagline:
    """Async facade over one :class:`Ragline` (built from ``settings`` unless ``rag`` is
    given). ``max_workers`` bounds the calls that run at once (default: the
    ``async_workers`` setting); further calls wait for a free worker."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        rag: Ragline | None = None,
        max_workers: int | None = None,
    ) -> None:
        self.rag = rag or Ragline(settings)
        workers = max_workers or self.rag.settings.async_workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="ragline-async")
        self._warm = threading.Lock()

    @property
    def settings(self) -> Settings:
        return self.rag.settings

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a worker, the lazy parts built first."""

        def call() -> T:
            self._ready()
            return fn(*args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    def _ready(self) -> None:
        """Build the lazy parts once: two first calls on two threads would otherwise
        each load the model and open the store."""
        with self._warm:
            _ = self.rag.embedder, self.rag.store

    async def ingest(self, path: str | Path, **options: Any) -> IngestReport:
        """:meth:`Ragline.ingest` (same options)."""
        return await self._run(self.rag.ingest, path, **options)

    async def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        """:meth:`Ragline.search` (same options)."""
        return await self._run(self.rag.search, query, **options)

    async def ask(
        self,
        question: str,
        *,
        history: HistoryInput | None = None,
        selected_text: str | None = None,
        hooks: AnswerHooks | None = None,
        **search: Unpack[SearchOptions],
    ) -> Answer:
        """:meth:`Ragline.ask`: a cited answer or the fallback."""
        return await self._run(
            self.rag.ask,
            question,
            history=history,
            selected_text=selected_text,
            hooks=hooks,
            **search,
        )

    async def ask_stream(
        self,
        question: str,
        *,
        history: HistoryInput | None = None,
        selected_text: str | None = None,
        hooks: AnswerHooks | None = None,
        **search: Unpack[SearchOptions],
    ) -> AsyncIterator[StreamEvent]:
        """:meth:`Ragline.ask_stream` as an async iterator: ``token``/``citation``
        events as they are written, then ``done``."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            events: Iterator[StreamEvent] | None = None
            try:
                self._ready()
                events = self.rag.ask_stream(
                    question, history=history, selected_text=selected_text, hooks=hooks, **search
                )
                for event in events:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
                    if stop.is_set():
                        break
            except BaseException as exc:  # handed to the consumer, raised there
                loop.call_soon_threadsafe(queue.put_nowait, exc)
            finally:
                close = getattr(events, "close", None)
                if callable(close):
                    close()  # the generator's own clean-up (an LLM connection)
                loop.call_soon_threadsafe(queue.put_nowait, _END)

        done = loop.run_in_executor(self._pool, produce)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield cast(StreamEvent, item)
        finally:
            stop.set()
            await done

    async def reindex(self, batch_size: int = 512) -> int:
        """:meth:`Ragline.reindex`."""
        return await self._run(self.rag.reindex, batch_size)

    async def status(self) -> dict[str, Any]:
        """:meth:`Ragline.status`."""
        return await self._run(self.rag.status)

    async def aclose(self) -> None:
        """Wait for the running calls, then close the index and the LLM connection."""
        await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown, True)
        self.rag.close()

    async def __aenter__(self) -> AsyncRagline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
