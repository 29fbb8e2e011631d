"""Request fields turned into engine arguments: cleaned text and retrieval options
with the caller's tenant forced into the filters (pure functions)."""

from __future__ import annotations

from typing import Any, cast

from ragline.answer.answerer import SearchOptions
from ragline.serve import schemas as s
from ragline.serve.validation import RequestProblem, check_range, clean_field
from ragline.settings import Settings
from ragline.store.filters import to_sql_predicate
from ragline.types import Filters


def clean_question(value: str, field: str, settings: Settings) -> str:
    return clean_field(
        value,
        field,
        min_chars=settings.min_question_chars,
        max_chars=settings.max_question_chars,
    )


def clean_context(value: str | None, settings: Settings, field: str = "context") -> str | None:
    if value is None:
        return None
    text = clean_field(value, field, min_chars=0, max_chars=settings.max_selected_text_chars)
    return text or None


def search_options(
    max_results: int | None,
    mode: str | None,
    filters: dict[str, s.FilterValue] | None,
    tenant: str,
    settings: Settings,
) -> SearchOptions:
    """Retrieval options with the caller's tenant forced into the filters."""
    top_k = None
    if max_results is not None:
        top_k = check_range(max_results, "max_results", low=1, high=settings.max_results_limit)
    merged: Filters = dict(filters or {})
    if len(merged) > settings.max_filters:
        raise RequestProblem(
            f"at most {settings.max_filters} filters are allowed, got {len(merged)}",
            field="filters",
        )
    merged.pop("tenant", None)  # never the user's choice
    for key, value in merged.items():  # one at a time, to name the one at fault
        try:
            to_sql_predicate({key: value})
        except (ValueError, TypeError) as e:
            raise RequestProblem(f"filters.{key}: {e}", field=f"filters.{key}") from None
    merged["tenant"] = tenant
    return SearchOptions(mode=cast(Any, mode), top_k=top_k, filters=merged)
