"""The OpenAPI document as the server enforces it: the configured limits filled in,
FastAPI's 422s removed (validation errors are 400s with the error body)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ragline.serve.schemas import QUESTION_FIELDS
from ragline.settings import Settings


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
        q_limits = {
            "minLength": settings.min_question_chars,
            "maxLength": settings.max_question_chars,
        }
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
            _limit_optional(props.get("filters"), {"maxProperties": settings.max_filters})
        for name in ("context", "selected_text"):
            _limit_optional(query_props.get(name), {"maxLength": settings.max_selected_text_chars})
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]


def _limit_optional(prop: dict[str, Any] | None, limits: dict[str, Any]) -> None:
    """Put ``limits`` on the non-null branch of an optional field's schema."""
    if not prop:
        return
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") != "null":
            branch.update(limits)
