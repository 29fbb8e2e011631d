"""FastAPI dependencies shared by the routers: the app's :class:`ServeState`, the
caller the middleware identified, the wait for the engine warm-up, and the end of a
query-log row."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from ragline.serve.errors import UNAVAILABLE
from ragline.serve.middleware import CALLER_KEY, client_ip
from ragline.serve.querylog import QueryLogRow
from ragline.serve.requestlog import mark_logged
from ragline.serve.state import Caller, ServeState
from ragline.types import Answer
from ragline.validation import RequestProblem


async def get_state(request: Request) -> ServeState:
    """The state of the app serving this request (set by ``create_app``). Async, like
    :func:`current_caller`: FastAPI runs a plain ``def`` dependency in a worker
    thread, a hop per request for a dictionary lookup."""
    state: ServeState = request.app.state.serve
    return state


async def current_caller(request: Request) -> Caller:
    """The caller the middleware identified (the default tenant on other paths)."""
    found = request.scope.get(CALLER_KEY)
    if isinstance(found, Caller):
        return found
    state: ServeState = request.app.state.serve
    return Caller(tenant=state.settings.tenant, ip=client_ip(request.scope))


StateDep = Annotated[ServeState, Depends(get_state)]
CallerDep = Annotated[Caller, Depends(current_caller)]


def ensure_warming(state: ServeState) -> None:
    """Start the warm-up again when the last one failed at least ``warm_retry_s`` ago,
    so a store that was down at start-up is picked up without a restart."""
    task = state.warm_task
    if state.ready or task is None or not task.done():
        return
    if time.monotonic() - state.warm_started < state.settings.warm_retry_s:
        return
    state.warm_started = time.monotonic()
    state.warm_task = asyncio.ensure_future(run_in_threadpool(state.try_warm))


async def wait_ready(state: ServeState) -> None:
    """Wait for the engine warm-up (tried again while it fails); 503 when it failed.
    Called by handlers after their input checks, so a bad request is a 400 even
    while the server starts."""
    if state.ready:
        return
    ensure_warming(state)
    task = state.warm_task
    if task is None:
        raise RequestProblem("the server is starting", status_code=503)
    with contextlib.suppress(Exception):
        await asyncio.shield(task)
    if not state.ready:
        raise RequestProblem(UNAVAILABLE, status_code=503)


def elapsed_ms(row: QueryLogRow) -> float:
    """Milliseconds since the row was started."""
    started = datetime.fromisoformat(row.created_at)
    return (datetime.now(UTC) - started).total_seconds() * 1000.0


async def finish_row(
    state: ServeState,
    row: QueryLogRow,
    status: int,
    error: str | None,
    answer: Answer | None,
    *,
    tokens: int | None = None,
) -> None:
    """Complete and write a query-log row (the write never raises); ``tokens`` is the
    total the response reported."""
    if answer is not None:
        privacy = state.settings.query_log_privacy
        row.record_answer(answer, tokens=tokens, salt=state.salt, privacy=privacy)
    row.finish(status, error, elapsed_ms(row))
    mark_logged()
    await run_in_threadpool(state.log_row, row)
