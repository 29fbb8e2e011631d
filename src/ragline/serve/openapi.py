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
        schemas["MetadataFilter"] = filter_component()
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


_SCALAR_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": "^[^\\u0000]*$"},
        {"type": "number"},
        {"type": "boolean"},
    ]
}
#: Text a range operator compares: ASCII without quotes or backslashes.
_RANGE_TEXT = {"type": "string", "pattern": "^[ !#-\\[\\]-~]*$"}
FILTER_REF = "#/components/schemas/MetadataFilter"


def _column_value(name: str, kind: type) -> dict[str, Any]:
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        bits = 32 if name in INT32_FIELDS else 64
        return {
            "type": "integer",
            "minimum": -(2 ** (bits - 1)) + 1,
            "maximum": 2 ** (bits - 1) - 1,
        }
    return {"type": "string", "pattern": "^[^\\u0000]*$"}


def _operators(value: dict[str, Any], ranged: dict[str, Any] | None) -> dict[str, Any]:
    """An operator object on one key whose values follow ``value``."""
    props: dict[str, Any] = {
        "$eq": value,
        "$ne": value,
        "$in": {"type": "array", "items": value},
        "$nin": {"type": "array", "items": value},
        "$exists": {"type": "boolean"},
    }
    if ranged is not None:
        props.update({op: ranged for op in ("$gt", "$gte", "$lt", "$lte")})
    return {
        "type": "object",
        "properties": props,
        "additionalProperties": False,
        "minProperties": 1,
    }


def _key_schema(value: dict[str, Any], ranged: dict[str, Any] | None) -> dict[str, Any]:
    return {"anyOf": [value, _operators(value, ranged)]}


def filters_schema() -> dict[str, Any]:
    """A filter object as the server reads it (docs/search.md): chunk fields with
    their value types, any other key (a front-matter key) with a scalar, each
    either as a value (equality) or an operator object; ``$and``/``$or``/``$not``
    nest filter objects (:data:`FILTER_REF`). ``tenant`` is accepted and ANDed
    with the caller's."""
    props: dict[str, Any] = {}
    for name, kind in CHUNK_FILTER_FIELDS.items():
        value = _column_value(name, kind)
        ranged = None if kind is bool else (_RANGE_TEXT if kind is str else value)
        props[name] = _key_schema(value, ranged)
    props["$and"] = {"type": "array", "minItems": 1, "items": {"$ref": FILTER_REF}}
    props["$or"] = {"type": "array", "minItems": 1, "items": {"$ref": FILTER_REF}}
    props["$not"] = {"$ref": FILTER_REF}
    number = {"type": "number", "minimum": -(2**63) + 1, "maximum": 2**63 - 1}
    meta_value = {"anyOf": [_SCALAR_SCHEMA["anyOf"][0], number, {"type": "boolean"}]}
    meta_ranged = {"anyOf": [_RANGE_TEXT, number]}
    return {
        "type": "object",
        "properties": props,
        "patternProperties": {
            "^(metadata\\.)?[A-Za-z_][A-Za-z0-9_-]{0,63}$": _key_schema(meta_value, meta_ranged)
        },
        "additionalProperties": False,
    }


def filter_component() -> dict[str, Any]:
    """The nested filter object (:data:`FILTER_REF`): a filter with at least one key."""
    return {**filters_schema(), "minProperties": 1}


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
