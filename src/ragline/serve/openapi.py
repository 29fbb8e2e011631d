"""The OpenAPI document as the server enforces it: the configured limits filled in,
FastAPI's 422s removed (validation errors are 400s with the error body)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

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
        for model, fields in {
            "QueryRequest": {"question": q_limits},
            "SearchRequest": {"query": q_limits},
        }.items():
            props = schemas.get(model, {}).get("properties", {})
            for field, limits in fields.items():
                props.get(field, {}).update(limits)
        for model in ("QueryRequest", "SearchRequest"):
            props = schemas.get(model, {}).get("properties", {})
            _limit_optional(
                props.get("max_results"), {"minimum": 1, "maximum": settings.max_results_limit}
            )
            _limit_optional(props.get("filters"), {"maxProperties": settings.max_filters})
        _limit_optional(
            schemas.get("QueryRequest", {}).get("properties", {}).get("context"),
            {"maxLength": settings.max_selected_text_chars},
        )
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
