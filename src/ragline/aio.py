"""ragline for asyncio applications (FastAPI, Starlette, aiohttp).

:class:`AsyncRagline` awaits the same pipeline as :class:`~ragline.engine.Ragline`: each
call runs on a worker thread of its own pool, so the event loop never blocks and calls
overlap where the work allows it (store and LLM I/O; the embedding and reader runs
release the GIL in onnxruntime; concurrent queries share the query-embedding batcher).
``ask_stream`` bridges the token stream to an async iterator and stops the producer when
the consumer leaves early; the server's SSE routes use the same bridge
(:func:`iterate_in_thread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar, Unpack, cast

from ragline.answer.answerer import HistoryInput, SearchOptions
from ragline.engine import AnswerHooks, Ragline
from ragline.ingest.report import IngestReport
from ragline.settings import Settings
from ragline.types import Answer, SearchResult, StreamEvent

T = TypeVar("T")
_END = object()


async def iterate_in_thread(
    start: Callable[[], Iterator[T]],
    *,
    name: str = "ragline-stream",
    pool: Executor | None = None,
) -> AsyncGenerator[T, None]:
    """Items of ``start()`` as they are produced in a worker thread: a blocking
    pipeline (embedding, the store, the generator's HTTP stream) streamed to the loop.

    ``start`` runs in the thread too (it may block: retrieval happens before the
    first event). An exception in the thread is re-raised here. Leaving the ``async
    for`` early (or being cancelled) stops the worker at its next item and closes the
    iterator there, in its own thread, which ends the generator's HTTP stream or model
    loop instead of letting it run for nobody. The worker is a daemon thread named
    ``name``, or with ``pool`` one of its threads, and then leaving waits for it to
    finish, so the pool's bound on concurrent calls holds.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    stop = threading.Event()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            stop.set()

    def work() -> None:
        iterator: Iterator[T] | None = None
        try:
            iterator = start()
            for item in iterator:
                if stop.is_set():
                    break
                put(item)
        except BaseException as exc:
            put(_Failure(exc))
        finally:
            close = getattr(iterator, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):  # a finished or broken generator
                    close()
            put(_END)

    done: asyncio.Future[None] | None = None
    if pool is None:
        threading.Thread(target=work, name=name, daemon=True).start()
    else:
        done = loop.run_in_executor(pool, work)
    try:
        while True:
            item = await queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield cast(T, item)
    finally:
        stop.set()
        if done is not None:
            await done


class _Failure:
    """An exception raised in the worker, on its way to the consumer."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


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

        def start() -> Iterator[StreamEvent]:
            self._ready()
            return self.rag.ask_stream(
                question, history=history, selected_text=selected_text, hooks=hooks, **search
            )

        # aclosing: leaving early stops the worker now, not when the bridge is collected.
        async with contextlib.aclosing(iterate_in_thread(start, pool=self._pool)) as events:
            async for event in events:
                yield event

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
