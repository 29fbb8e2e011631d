"""OpenAI-compatible endpoints: ``POST /v1/chat/completions`` (streaming and not) and
``GET /v1/models``, so any OpenAI client or chat front end can talk to ragline.

The last user message is the question and earlier user/assistant turns are the
history (system prompts are ignored: the answer prompt is ragline's, which is what
keeps answers grounded). Citations stay in the text as ``[n]`` and also come as
an extra ``citations`` field (each with its numbered source) on the response, or
on the final chunk of a stream.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi import APIRouter
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from ragline.aio import iterate_in_thread
from ragline.answer.answerer import SearchOptions
from ragline.serve import schemas as s
from ragline.serve.deps import CallerDep, StateDep, finish_row, wait_ready
from ragline.serve.errors import ERROR_RESPONSES, engine_error
from ragline.serve.openapi import MAX_HISTORY_RAW_CHARS
from ragline.serve.querylog import QueryLogRow
from ragline.serve.shapes import citation_out, source_out, usage_of
from ragline.serve.sse import format_event
from ragline.serve.state import AnswerRun, ServeState, log, new_query_id
from ragline.serve.traces import trace_answer
from ragline.store.base import StoreError
from ragline.types import Answer
from ragline.validation import (
    RequestProblem,
    check_unicode,
    clean_field,
    clean_text,
)

ENDPOINT = "/v1/chat/completions"
CREATED = int(time.time())


def message_text(message: s.ChatMessageIn) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in message.content if p.type == "text" and p.text)


def split_messages(
    messages: list[s.ChatMessageIn], max_messages: int
) -> tuple[str, list[dict[str, str]]]:
    """(question, history): the question is the last user message, the messages before
    it are the history (messages after it, e.g. an assistant prefill, are ignored)."""
    if len(messages) > max_messages:
        raise RequestProblem(
            f"at most {max_messages} messages are allowed, got {len(messages)}", field="messages"
        )
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise RequestProblem("messages must hold at least one user message", field="messages")
    last = messages[users[-1]]
    messages = messages[: users[-1]]
    for i, m in enumerate(messages):
        check_unicode(message_text(m), f"messages.{i}.content")
        if len(message_text(m)) > MAX_HISTORY_RAW_CHARS:
            raise RequestProblem(
                f"messages.{i} is longer than {MAX_HISTORY_RAW_CHARS:,} characters",
                field=f"messages.{i}.content",
            )
    history = [
        {"role": m.role, "content": clean_text(message_text(m))}
        for m in messages
        if m.role in ("user", "assistant") and message_text(m).strip()
    ]
    return message_text(last), history


def cited(answer: Answer) -> list[dict[str, Any]]:
    """Each citation with the numbered source it points at (``source`` is the Source)."""
    by_number = {src.number: src for src in answer.sources}
    out = []
    for c in answer.citations:
        src = by_number.get(c.number)
        d = citation_out(c, src)
        d["source"] = source_out(src) if src is not None else None
        out.append(d)
    return out


router = APIRouter(tags=["openai"])


@router.get("/v1/models", response_model=s.ModelList, responses=ERROR_RESPONSES)
async def models(who: CallerDep, state: StateDep) -> dict[str, Any]:
    """The one model ragline serves (answers come from the configured generator)."""
    return {
        "object": "list",
        "data": [
            {
                "id": state.settings.serve_model_name,
                "object": "model",
                "created": CREATED,
                "owned_by": "ragline",
            }
        ],
    }


@router.post(
    ENDPOINT,
    response_model=s.ChatCompletionResponse,
    responses={
        **ERROR_RESPONSES,
        200: {
            "description": "A chat completion, or (stream: true) a stream of chunks.",
            "content": {
                "application/json": {
                    "schema": {"$ref": "#/components/schemas/ChatCompletionResponse"}
                },
                "text/event-stream": {
                    "schema": {
                        "type": "object",
                        "properties": {"data": {"type": "string"}},
                        "required": ["data"],
                    }
                },
            },
        },
    },
    summary="OpenAI-compatible chat completion with citations",
)
async def chat_completions(body: s.ChatCompletionRequest, who: CallerDep, state: StateDep) -> Any:
    started_ns = time.time_ns()
    settings = state.settings
    if body.n not in (None, 1):
        raise RequestProblem("only n=1 is supported", field="n")
    raw, history = split_messages(body.messages, settings.max_chat_messages)
    question = clean_field(
        raw,
        "messages",
        min_chars=settings.min_question_chars,
        max_chars=settings.max_question_chars,
    )
    options = SearchOptions(filters={"tenant": who.tenant})
    await wait_ready(state)
    query_id = new_query_id()
    completion_id = f"chatcmpl-{query_id}"
    row = state.start_row(who, ENDPOINT, question, query_id)
    run = AnswerRun(state, who.tenant)
    model = settings.serve_model_name
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            stream_chunks(state, run, question, history, options, completion_id, model, row,
                          include_usage, tenant=who.tenant, query_id=query_id,
                          started_ns=started_ns),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )  # fmt: skip
    try:
        answer = await run_in_threadpool(run.answer, question, history, None, options)
    except (ValueError, StoreError) as exc:
        problem = engine_error(exc, field="messages")
        await finish_row(state, row, problem.status_code, str(exc), None)
        raise problem from None
    answered_ns = time.time_ns()
    state.metrics.observe_answer(ENDPOINT, answer)
    trace_answer(
        settings, ENDPOINT, answer, query_id=query_id, tenant=who.tenant, question=question,
        started_ns=started_ns, answered_ns=answered_ns, count_tokens=run.count_tokens,
        retrieved=run.retrieved,
    )  # fmt: skip
    usage = usage_of(answer, run.count_tokens)
    await finish_row(state, row, 200, None, answer, tokens=usage["total_tokens"])
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "finish_reason": "stop" if answer.complete else "length",
                }
            ],
            "usage": usage_of(answer, run.count_tokens),
            "citations": cited(answer),
            "sources": [source_out(src) for src in answer.sources],
        }
    )


async def stream_chunks(
    state: ServeState,
    run: AnswerRun,
    question: str,
    history: list[dict[str, str]],
    options: SearchOptions,
    completion_id: str,
    model: str,
    row: QueryLogRow,
    include_usage: bool,
    *,
    tenant: str = "",
    query_id: str = "",
    started_ns: int = 0,
) -> AsyncIterator[bytes]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return format_event(
            None,
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            },
        )

    answer: Answer | None = None
    status, error = 200, None
    try:
        yield chunk({"role": "assistant", "content": ""})
        async for event in iterate_in_thread(lambda: run.stream(question, history, None, options)):
            if event.type == "token":
                yield chunk({"content": event.text})
            elif event.type == "error":
                status, error = 502, event.error
            elif event.type == "done" and event.answer is not None:
                answer = event.answer
        if answer is not None:
            answered_ns = time.time_ns()
            state.metrics.observe_answer(ENDPOINT, answer)
            trace_answer(
                state.settings, ENDPOINT, answer, query_id=query_id, tenant=tenant,
                question=question, started_ns=started_ns or answered_ns,
                answered_ns=answered_ns, count_tokens=run.count_tokens, retrieved=run.retrieved,
            )  # fmt: skip
        if error is not None:
            yield format_event(
                None,
                {"error": {"message": error, "type": "generation_failed", "code": 502}},
            )
        elif answer is not None:
            yield chunk(
                {},
                "stop",
                citations=cited(answer),
                sources=[source_out(src) for src in answer.sources],
            )
            if include_usage:
                yield format_event(
                    None,
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": usage_of(answer, run.count_tokens),
                    },
                )
    except (ValueError, StoreError) as exc:
        problem = engine_error(exc, field="messages")
        status, error = problem.status_code, str(exc)
        yield format_event(None, {"error": {"message": problem.message, "type": problem.code,
                                             "code": status}})  # fmt: skip
    except Exception as exc:
        status, error = 500, f"{type(exc).__name__}: {exc}"
        log.exception("completion stream failed")
        failure = {"message": "internal server error", "type": "internal_error", "code": 500}
        yield format_event(None, {"error": failure})
    except BaseException:
        state.metrics.stream_disconnects.inc()
        status, error = 499, "client disconnected"
        raise
    finally:
        with anyio.CancelScope(shield=True):
            tokens = usage_of(answer, run.count_tokens)["total_tokens"] if answer else None
            await finish_row(state, row, status, error, answer, tokens=tokens)
    yield b"data: [DONE]\n\n"
