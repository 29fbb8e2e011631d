"""``POST /api/feedback`` (a rating of an answer: thumbs up or down, an optional
comment) and ``POST /api/feedback/click`` (a click on one of its citations), kept with
the query log (see :mod:`ragline.serve.feedback`).

The query id must be one the caller's tenant was answered under: a malformed id is a
400, an id the tenant's log does not hold a 404 (as another tenant's document), so no
one rates another tenant's answers. Two endpoints, not one with a ``kind``, so that
every body the OpenAPI schema allows is one the server takes."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from ragline.serve.deps import CallerDep, StateDep
from ragline.serve.errors import LOOKUP_RESPONSES
from ragline.serve.feedback import FeedbackRow
from ragline.serve.querylog import QueryLogError, hash_ip, utc_now
from ragline.serve.state import Caller, ServeState, log
from ragline.validation import RequestProblem, check_length, check_unicode

router = APIRouter(tags=["feedback"])

QUERY_ID = Field(
    pattern=r"^[0-9a-f]{32}$",
    description="The answer's query_id (from /api/query, /api/chat or /api/search).",
)


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query_id: str = QUERY_ID
    rating: Literal["up", "down"] = Field(description="Whether the answer helped.")
    comment: str | None = Field(
        None, description="Why, in a few words (not stored in privacy mode)."
    )


class ClickRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query_id: str = QUERY_ID
    citation: int = Field(ge=1, le=1000, description="The [n] that was opened.")


class FeedbackResponse(BaseModel):
    query_id: str
    kind: Literal["rating", "click"]
    recorded: bool = Field(description="False when the query log is off.")


def clean_comment(comment: str | None, max_chars: int) -> str | None:
    """The comment with whitespace collapsed (None when empty), or a 400 naming it."""
    if comment is None:
        return None
    check_unicode(comment, "comment")
    text = " ".join(comment.split())
    return check_length(text, "comment", min_chars=0, max_chars=max_chars) or None


async def keep(state: ServeState, who: Caller, row: FeedbackRow) -> dict[str, Any]:
    """Store ``row`` unless the log is off; 404 for a query id the tenant has not got."""
    if not state.settings.query_log_enabled:
        return {"query_id": row.query_id, "kind": row.kind, "recorded": False}

    def store() -> None:
        if not state.query_log.has_query(who.tenant, row.query_id):
            raise RequestProblem(
                "query_id: no answer with this id in this tenant's query log",
                field="query_id",
                status_code=404,
            )
        state.query_log.add_feedback(row)

    try:
        await run_in_threadpool(store)
    except QueryLogError as exc:
        log.error("feedback not stored: %s", exc)
        raise RequestProblem(
            "feedback cannot be stored right now; try again shortly", status_code=503
        ) from None
    return {"query_id": row.query_id, "kind": row.kind, "recorded": True}


@router.post(
    "/api/feedback",
    response_model=FeedbackResponse,
    responses=LOOKUP_RESPONSES,
    summary="Rate an answer: up or down, with an optional comment",
)
async def rate(body: FeedbackRequest, who: CallerDep, state: StateDep) -> dict[str, Any]:
    comment = clean_comment(body.comment, state.settings.feedback_max_comment_chars)
    ip_hash = hash_ip(who.ip, state.salt)
    row = FeedbackRow(body.query_id, who.tenant, utc_now(), "rating", ip_hash, body.rating, comment)
    return await keep(state, who, row)


@router.post(
    "/api/feedback/click",
    response_model=FeedbackResponse,
    responses=LOOKUP_RESPONSES,
    summary="Record that a citation of an answer was opened",
)
async def click(body: ClickRequest, who: CallerDep, state: StateDep) -> dict[str, Any]:
    ip_hash = hash_ip(who.ip, state.salt)
    row = FeedbackRow(
        body.query_id, who.tenant, utc_now(), "click", ip_hash, citation=body.citation
    )
    return await keep(state, who, row)
