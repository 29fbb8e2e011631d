"""``/api/conversations``: the caller's conversations, one with its messages, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from ragline.serve import schemas as s
from ragline.serve.conversations import Conversation
from ragline.serve.deps import CallerDep, StateDep
from ragline.serve.errors import ERROR_RESPONSES, LOOKUP_RESPONSES
from ragline.validation import RequestProblem

router = APIRouter(tags=["conversations"])


def conversation_out(c: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": c.conversation_id,
        "title": c.title,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "messages": c.messages,
    }


def no_such(conversation_id: str) -> RequestProblem:
    return RequestProblem(
        f"conversation_id {conversation_id!r}: no such conversation",
        status_code=404,
        field="conversation_id",
    )


@router.get(
    "/api/conversations", response_model=s.ConversationList, responses=ERROR_RESPONSES,
    summary="The caller's conversations, latest first",
)  # fmt: skip
async def list_conversations(who: CallerDep, state: StateDep) -> dict[str, Any]:
    convs = await run_in_threadpool(state.conversations.list, who.tenant)
    return {"conversations": [conversation_out(c) for c in convs]}


@router.get(
    "/api/conversations/{conversation_id}", response_model=s.ConversationDetail,
    responses=LOOKUP_RESPONSES, summary="A conversation with its messages",
)  # fmt: skip
async def get_conversation(conversation_id: str, who: CallerDep, state: StateDep) -> dict[str, Any]:
    conv = await run_in_threadpool(state.conversations.get, who.tenant, conversation_id)
    if conv is None:
        raise no_such(conversation_id)
    msgs = await run_in_threadpool(state.conversations.messages, who.tenant, conversation_id)
    return {
        **conversation_out(conv),
        "history": [
            {
                "message_id": m.message_id,
                "role": m.role,
                "content": m.content,
                "created_at": m.created_at,
                "query_id": m.query_id,
                "answer": m.answer,
            }
            for m in msgs
        ],
    }


@router.delete(
    "/api/conversations/{conversation_id}", response_model=s.DeleteResponse,
    responses=LOOKUP_RESPONSES, summary="Delete a conversation",
)  # fmt: skip
async def delete_conversation(
    conversation_id: str, who: CallerDep, state: StateDep
) -> dict[str, Any]:
    if not await run_in_threadpool(state.conversations.delete, who.tenant, conversation_id):
        raise no_such(conversation_id)
    return {"doc_id": conversation_id, "deleted": True}
