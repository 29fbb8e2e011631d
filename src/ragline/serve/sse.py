"""Server-sent events, and the bridge that runs a blocking event iterator off the loop.

The answer pipeline is synchronous (embedding, LanceDB, the generator's HTTP stream);
:func:`iterate_in_thread` runs it in a worker thread and hands each event to the event
loop as soon as it exists, so tokens are flushed as they come. When the consumer goes
away (the client disconnected and Starlette cancelled the response), the worker is told
to stop: it closes the iterator after the event in hand, which ends the generator's
HTTP stream or model loop instead of letting it run to the end for nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_END = object()


def format_event(event: str | None, data: Any) -> bytes:
    """One SSE message; ``data`` is JSON-encoded on a single line (no field injection)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in payload.split("\n")]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str = "") -> bytes:
    """An SSE comment line: keeps proxies from buffering or timing the stream out."""
    return f": {text}\n\n".encode()


async def iterate_in_thread(
    start: Callable[[], Iterator[T]], *, name: str = "ragline-stream"
) -> AsyncIterator[T]:
    """Items of ``start()`` as they are produced in a worker thread.

    ``start`` runs in the thread too (it may block: retrieval happens before the
    first event). An exception in the thread is re-raised here. Leaving the ``async
    for`` early (or being cancelled) stops the worker at its next item and closes the
    iterator there, in its own thread.
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

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = await queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item  # type: ignore[misc]
    finally:
        stop.set()


class _Failure:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
