"""The OpenAPI document as the server enforces it: the configured limits filled in,
FastAPI's 422s removed (validation errors are 400s with the error body)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ragline.serve.schemas import QUESTION_FIELDS
from ragline.settings import Settings
from ragline.store.filters import CHUNK_FILTER_FIELDS, INT32_FIELDS
from ragline.validation import MARKUP_FACTOR


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Replace ``app.openapi`` with a builder that writes the limits of ``settings``."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        for path_item in doc.get("paths", {}).values():
            for op in path_item.values():
                if isinstance(op, dict):
                    op.get("responses", {}).pop("422", None)
        schemas = doc.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        q_limits: dict[str, Any] = {
            "minLength": settings.min_question_chars,
            "maxLength": settings.max_question_chars,
        }
        if settings.min_question_chars > 0:
            q_limits["pattern"] = text_pattern(settings.min_question_chars)
        props = schemas.get("SearchRequest", {}).get("properties", {})
        props.get("query", {}).update(q_limits)
        query_props = schemas.get("QueryRequest", {}).get("properties", {})
        for name in QUESTION_FIELDS:  # a string when given (the anyOf says one must be)
            if name in query_props:
                described = query_props[name].get("description", "")
                query_props[name] = {"type": "string", "description": described, **q_limits}
        for model in ("QueryRequest", "SearchRequest"):
            props = schemas.get(model, {}).get("properties", {})
            _limit_optional(
                props.get("max_results"), {"minimum": 1, "maximum": settings.max_results_limit}
            )
            _limit_optional(
                props.get("filters"),
                {"maxProperties": settings.max_filters, **filters_schema()},
            )
        for name in ("context", "selected_text"):
            _limit_optional(query_props.get(name), {"maxLength": settings.max_selected_text_chars})
        _chat_limits(schemas, settings, q_limits)
        rating = schemas.get("FeedbackRequest", {}).get("properties", {})
        _limit_optional(rating.get("comment"), {"maxLength": settings.feedback_max_comment_chars})
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]


#: A character that survives cleaning: not whitespace (Python's, which also counts
#: U+001C–U+001F and U+0085) and not a control character (cleaning drops those).
_KEPT_CHAR = "[^\\s\\u0000-\\u001f\\u007f\\u0085]"


#: As ragline.serve.routes.openai.MAX_HISTORY_RAW_CHARS (the schema module cannot
#: import a router).
MAX_HISTORY_RAW_CHARS = MARKUP_FACTOR * 2000


def _chat_limits(schemas: dict[str, Any], settings: Settings, q_limits: dict[str, Any]) -> None:
    """``/v1/chat/completions`` as the server checks it: 1 to ``max_chat_messages``
    messages, one of them the user's (the last user message is the question, so
    user messages follow the question's rules), and ``n`` only 1."""
    request = schemas.get("ChatCompletionRequest", {}).get("properties", {})
    messages = request.get("messages")
    if messages is not None:
        messages.update(
            minItems=1,
            maxItems=settings.max_chat_messages,
            contains={"type": "object", "properties": {"role": {"const": "user"}}},
        )
    if "n" in request:
        one = {"type": "integer", "minimum": 1, "maximum": 1}
        request["n"] = {"anyOf": [one, {"type": "null"}], "description": "Only 1 is supported."}
    if "ChatMessageIn" in schemas:
        name = {"anyOf": [{"type": "string"}, {"type": "null"}]}
        schemas["ChatMessageIn"] = {
            "title": "ChatMessageIn",
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "role": {"const": "user"},
                        "content": {"type": "string", **q_limits},
                        "name": name,
                    },
                    "required": ["role", "content"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "role": {"enum": ["system", "developer", "assistant", "tool"]},
                        "content": {
                            "anyOf": [
                                {"type": "string", "maxLength": MAX_HISTORY_RAW_CHARS},
                                {"type": "null"},
                            ]
                        },
                        "name": name,
                    },
                    "required": ["role"],
                    "additionalProperties": False,
                },
            ],
        }


def filters_schema() -> dict[str, Any]:
    """The filterable chunk fields and their value types, as the server checks them
    (``tenant`` is accepted and replaced by the caller's)."""
    props: dict[str, Any] = {}
    for name, kind in CHUNK_FILTER_FIELDS.items():
        if kind is bool:
            props[name] = {"type": "boolean"}
        elif kind is int:
            bits = 32 if name in INT32_FIELDS else 64
            props[name] = {
                "type": "integer",
                "minimum": -(2 ** (bits - 1)),
                "maximum": 2 ** (bits - 1) - 1,
            }
        else:
            props[name] = {"type": "string", "pattern": "^[^\\u0000]*$"}
    return {"properties": props, "additionalProperties": False}


def text_pattern(min_chars: int) -> str:
    """An ECMA regex for "at least ``min_chars`` characters that cleaning keeps", so a
    schema-valid question is not one the server finds too short once whitespace and
    control characters are gone (HTML tags are the one thing it cannot say)."""
    return f"({_KEPT_CHAR}[\\s\\S]*){{{min_chars}}}"


def _limit_optional(prop: dict[str, Any] | None, limits: dict[str, Any]) -> None:
    """Put ``limits`` on the non-null branch of an optional field's schema."""
    if not prop:
        return
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") != "null":
            branch.update(limits)
