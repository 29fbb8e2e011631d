"""``POST /api/query`` (one JSON answer) and ``POST /api/chat`` (the same answer as
server-sent events), both with citations and optional conversation history."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from ragline.aio import iterate_in_thread
from ragline.answer.answerer import SearchOptions
from ragline.serve import schemas as s
from ragline.serve.conversations import NotSaved
from ragline.serve.deps import CallerDep, StateDep, finish_row, wait_ready
from ragline.serve.errors import LOOKUP_RESPONSES, engine_error
from ragline.serve.inputs import clean_context, clean_question, search_options
from ragline.serve.querylog import QueryLogRow
from ragline.serve.shapes import answer_body, citation_out, source_out, usage_of
from ragline.serve.sse import format_event
from ragline.serve.state import AnswerRun, Caller, ServeState, log, new_query_id
from ragline.serve.traces import trace_answer
from ragline.settings import Settings
from ragline.store.base import StoreError
from ragline.types import Answer
from ragline.validation import RequestProblem

router = APIRouter(tags=["answers"])

#: One server-sent event as clients parse it (each ``data`` is one JSON document).
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["token", "citation", "done", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
    "required": ["data"],
}


def question_and_context(body: s.QueryRequest, settings: Settings) -> tuple[str, str | None]:
    """The cleaned question and selected text, from ragline's fields or a seed's aliases."""
    field, raw = body.question_field()
    if raw is None:
        raise RequestProblem(
            "question: Field required (or its alias message or query)", field="question"
        )
    question = clean_question(raw, field, settings)
    context_field, context_raw = body.context_text()
    return question, clean_context(context_raw, settings, context_field)


async def history_of(
    state: ServeState, tenant: str, conversation_id: str | None
) -> tuple[str | None, list[dict[str, str]]]:
    if conversation_id is None:
        return None, []
    conv = await run_in_threadpool(state.conversations.get, tenant, conversation_id)
    if conv is None:
        raise RequestProblem(
            f"conversation_id {conversation_id!r}: no such conversation",
            status_code=404,
            field="conversation_id",
        )
    msgs = await run_in_threadpool(
        state.conversations.messages, tenant, conversation_id, state.rag.settings.history_messages
    )
    return conv.conversation_id, [{"role": m.role, "content": m.content} for m in msgs]


@dataclass(frozen=True)
class Started:
    """An answer request, read and under way: its question, selected text, search
    options, conversation (id and earlier messages), query id, log row and run."""

    question: str
    context: str | None
    options: SearchOptions
    conversation_id: str | None
    history: list[dict[str, str]]
    query_id: str
    row: QueryLogRow
    run: AnswerRun


async def start_answer(
    body: s.QueryRequest, who: Caller, state: ServeState, endpoint: str, *, new_conversation: bool
) -> Started:
    """Read, check and start a request of /api/query or /api/chat the same way for both:
    bad input is refused before waiting for the engine, an unknown conversation after;
    with ``new_conversation`` a request without one starts one (before its log row,
    which names it)."""
    settings = state.settings
    question, context = question_and_context(body, settings)
    options = search_options(body.max_results, body.mode, body.filters, who.tenant, settings)
    await wait_ready(state)
    conversation_id, history = await history_of(state, who.tenant, body.conversation_id)
    if conversation_id is None and new_conversation:
        conv = await run_in_threadpool(state.conversations.create, who.tenant, question)
        conversation_id = conv.conversation_id
    query_id = new_query_id()
    row = state.start_row(
        who, endpoint, question, query_id,
        session_id=body.session_id, conversation_id=conversation_id,
    )  # fmt: skip
    run = AnswerRun(state, who.tenant)
    return Started(question, context, options, conversation_id, history, query_id, row, run)


async def store_exchange(
    state: ServeState, tenant: str, conversation_id: str, question: str, text: str,
    query_id: str, answer: dict[str, Any],
) -> str:  # fmt: skip
    """Add the question, then the answer; the answer's message id (``NotSaved`` when
    a write fails)."""
    conversations = state.conversations
    await run_in_threadpool(
        lambda: conversations.add(tenant, conversation_id, "user", question, query_id=query_id)
    )
    return await run_in_threadpool(
        lambda: conversations.add(
            tenant, conversation_id, "assistant", text, query_id=query_id, answer=answer
        )
    )


async def remember(
    state: ServeState, tenant: str, conversation_id: str, question: str, answer: Answer,
    query_id: str, body: dict[str, Any],
) -> str | None:  # fmt: skip
    """Store the exchange (the user message first) and return the answer's message id;
    an answer cut short is stored as it stands, marked ``incomplete``. When the write
    fails (a full disk) the answer stands: None, and ``metadata.conversation_note``
    in ``body`` says why."""
    stored = body
    if not answer.complete:
        stored = {**body, "incomplete": True, "reason": answer.error or "generation stopped"}
    try:
        return await store_exchange(
            state, tenant, conversation_id, question, answer.text, query_id, stored
        )
    except NotSaved as exc:
        body["metadata"]["conversation_note"] = str(exc)
        return None


@router.post(
    "/api/query",
    response_model=s.QueryResponse,
    responses=LOOKUP_RESPONSES,
    summary="Answer a question with citations",
)
async def query(body: s.QueryRequest, who: CallerDep, state: StateDep) -> dict[str, Any]:
    started_ns = time.time_ns()
    settings = state.settings
    go = await start_answer(body, who, state, "/api/query", new_conversation=False)
    question, conversation_id, query_id = go.question, go.conversation_id, go.query_id
    run, row = go.run, go.row
    try:
        answer = await run_in_threadpool(run.answer, question, go.history, go.context, go.options)
    except (ValueError, StoreError) as exc:
        problem = engine_error(exc)
        await finish_row(state, row, problem.status_code, problem.message, None)
        raise problem from None
    except Exception as exc:
        await finish_row(state, row, 500, f"{type(exc).__name__}: {exc}", None)
        raise
    answered_ns = time.time_ns()
    state.metrics.observe_answer("/api/query", answer)
    out = answer_body(
        answer, query_id, conversation_id, run.count_tokens,
        retrieved=run.retrieved, session_id=body.session_id,
    )  # fmt: skip
    trace_answer(
        settings, "/api/query", answer, query_id=query_id, tenant=who.tenant, question=question,
        started_ns=started_ns, answered_ns=answered_ns, count_tokens=run.count_tokens,
        retrieved=run.retrieved,
    )  # fmt: skip
    if conversation_id is not None:
        await remember(state, who.tenant, conversation_id, question, answer, query_id, out)
    await finish_row(state, row, 200, None, answer, tokens=out["metadata"]["total_tokens"])
    return out


@router.post(
    "/api/chat",
    response_class=StreamingResponse,
    responses={
        **LOOKUP_RESPONSES,
        200: {
            "description": "Server-sent events: token, citation, done (or error).",
            "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
        },
    },
    summary="Answer a question as a stream of server-sent events",
)
async def chat(body: s.QueryRequest, who: CallerDep, state: StateDep) -> StreamingResponse:
    started_ns = time.time_ns()
    go = await start_answer(body, who, state, "/api/chat", new_conversation=True)
    assert go.conversation_id is not None  # started above when the request had none
    return StreamingResponse(
        chat_events(
            state,
            go.run,
            go.question,
            go.history,
            go.context,
            go.options,
            who,
            go.conversation_id,
            go.query_id,
            go.row,
            body.session_id,
            started_ns,
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def remember_cut(
    state: ServeState, tenant: str, conversation_id: str, question: str, partial: str,
    query_id: str, reason: str,
) -> None:  # fmt: skip
    """Store an exchange whose stream ended before its answer did (client gone)."""
    marked = {"incomplete": True, "reason": reason}
    with contextlib.suppress(NotSaved):  # logged; the client is gone, nobody to tell
        await store_exchange(state, tenant, conversation_id, question, partial, query_id, marked)


async def chat_events(
    state: ServeState,
    run: AnswerRun,
    question: str,
    history: list[dict[str, str]],
    context: str | None,
    options: SearchOptions,
    who: Caller,
    conversation_id: str,
    query_id: str,
    row: QueryLogRow,
    session_id: str | None = None,
    started_ns: int | None = None,
) -> AsyncIterator[bytes]:
    started = time.perf_counter()
    answer: Answer | None = None
    status, error = 200, None
    failed = False
    partial: list[str] = []
    try:
        async for event in iterate_in_thread(
            lambda: run.stream(question, history, context, options)
        ):
            if failed and event.type != "done":
                continue
            if event.type == "token":
                partial.append(event.text)
                # "token" is seed 002's name for the text; "text" is ragline's.
                yield format_event("token", {"text": event.text, "token": event.text})
            elif event.type == "citation" and event.citation is not None:
                src = run.source(event.citation.number)
                data = citation_out(event.citation, src)
                data["source"] = source_out(src) if src is not None else None
                yield format_event("citation", data)
            elif event.type == "error":
                failed, status, error = True, 502, event.error
                yield format_event(
                    "error",
                    {
                        "error": "generation_failed",
                        "message": event.error,
                        "status_code": 502,
                        # the exchange is stored, marked incomplete, under this id
                        "conversation_id": conversation_id,
                        "incomplete": True,
                    },
                )
            elif event.type == "done" and event.answer is not None:
                answer = event.answer
                answered_ns = time.time_ns()
                state.metrics.observe_answer("/api/chat", answer)
                trace_answer(
                    state.settings, "/api/chat", answer, query_id=query_id, tenant=who.tenant,
                    question=question, started_ns=started_ns or answered_ns,
                    answered_ns=answered_ns, count_tokens=run.count_tokens,
                    retrieved=run.retrieved,
                )  # fmt: skip
                body = answer_body(
                    answer, query_id, conversation_id, run.count_tokens,
                    retrieved=run.retrieved, session_id=session_id,
                )  # fmt: skip
                tokens = usage_of(answer, run.count_tokens)["total_tokens"]
                message_id = await remember(
                    state, who.tenant, conversation_id, question, answer, query_id, body
                )
                if not failed:
                    yield format_event(
                        "done",
                        {
                            "conversation_id": conversation_id,
                            "message_id": message_id,
                            "query_id": query_id,
                            "answer": body,
                            "total_tokens": tokens,
                            "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                        },
                    )
    except (ValueError, StoreError) as exc:
        problem = engine_error(exc)
        status, error = problem.status_code, problem.message
        yield format_event(
            "error", {"error": problem.code, "message": problem.message, "status_code": status}
        )
    except Exception as exc:
        status, error = 500, f"{type(exc).__name__}: {exc}"
        log.exception("chat stream failed")
        yield format_event(
            "error",
            {"error": "internal_error", "message": "internal server error", "status_code": 500},
        )
    except (asyncio.CancelledError, GeneratorExit):
        state.metrics.stream_disconnects.inc()
        status, error = 499, "client disconnected"
        if answer is None:  # the exchange was not stored: keep what was said, marked
            with anyio.CancelScope(shield=True):
                await remember_cut(state, who.tenant, conversation_id, question,
                                   "".join(partial), query_id, error)  # fmt: skip
        raise
    finally:
        with anyio.CancelScope(shield=True):
            spent = usage_of(answer, run.count_tokens)["total_tokens"] if answer else None
            await finish_row(state, row, status, error, answer, tokens=spent)
