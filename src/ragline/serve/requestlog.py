"""One query-log row per request to a question endpoint, also for those refused
before a handler could start one (400, 401, 413, 429, a 500 from the middleware).

Handlers write the full row (:func:`ragline.serve.deps.finish_row` marks the request
as logged); the middleware writes a short row for any request to a logged endpoint
that ends without one, from what it saw: the status, the error message of the
response, and the question/session fields of the JSON body when there is one."""

from __future__ import annotations

import json
from contextvars import ContextVar, Token
from typing import Any

from ragline.serve.querylog import QueryLogRow
from ragline.serve.state import Caller, ServeState

#: Endpoints (route templates) whose requests each get a row.
LOGGED_ENDPOINTS = frozenset({"/api/query", "/api/chat", "/api/search", "/v1/chat/completions"})
#: Longest question text kept from a refused body (the rest is not a question).
MAX_QUESTION_CHARS = 2000

_logged: ContextVar[list[bool] | None] = ContextVar("ragline_request_logged", default=None)


def begin() -> Token[list[bool] | None]:
    """Start tracking the current request (the middleware, before the app runs)."""
    return _logged.set([False])


def end(token: Token[list[bool] | None]) -> bool:
    """Stop tracking; whether a handler wrote the request's row."""
    flag = _logged.get()
    _logged.reset(token)
    return bool(flag and flag[0])


def mark_logged() -> None:
    flag = _logged.get()
    if flag is not None:
        flag[0] = True


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def body_fields(raw: bytes) -> dict[str, str | None]:
    """The question, session and conversation of a JSON body, whatever its shape
    (ragline's, a seed's alias, or OpenAI's ``messages``); empty when unreadable."""
    try:
        doc = json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        return {}
    if not isinstance(doc, dict):
        return {}
    question = next(
        (q for q in (_text(doc.get(k)) for k in ("question", "message", "query")) if q), None
    )
    messages = doc.get("messages")
    if question is None and isinstance(messages, list) and messages:
        last = messages[-1]
        question = _text(last.get("content")) if isinstance(last, dict) else None
    return {
        "question": question[:MAX_QUESTION_CHARS] if question else None,
        "session_id": _text(doc.get("session_id")),
        "conversation_id": _text(doc.get("conversation_id")),
    }


def error_message(raw: bytes) -> str | None:
    """The ``message`` of an error body the middleware saw go out."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return _text(doc.get("message")) if isinstance(doc, dict) else None


def refused_row(
    state: ServeState,
    caller: Caller,
    endpoint: str,
    request_body: bytes,
    status_code: int,
    error: str | None,
    elapsed_ms: float,
) -> QueryLogRow:
    """The row of a request that ended without a handler's row."""
    fields = body_fields(request_body)
    row = state.start_row(
        caller,
        endpoint,
        fields.get("question") or "",
        session_id=fields.get("session_id"),
        conversation_id=fields.get("conversation_id"),
    )
    row.finish(status_code, error or f"HTTP {status_code}", elapsed_ms)
    return row
