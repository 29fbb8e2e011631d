"""Request fields turned into engine arguments: cleaned text and retrieval options
with the caller's tenant forced into the filters (pure functions)."""

from __future__ import annotations

from typing import Any, cast

from ragline.answer.answerer import SearchOptions
from ragline.filter_input import request_filters
from ragline.settings import AnswerSettings, Settings
from ragline.validation import check_range, clean_field


def clean_question(value: str, field: str, settings: Settings) -> str:
    return clean_field(
        value,
        field,
        min_chars=settings.min_question_chars,
        max_chars=settings.max_question_chars,
    )


def clean_context(
    value: str | None, settings: AnswerSettings, field: str = "context"
) -> str | None:
    if value is None:
        return None
    text = clean_field(value, field, min_chars=0, max_chars=settings.max_selected_text_chars)
    return text or None


def search_options(
    max_results: int | None,
    mode: str | None,
    filters: dict[str, Any] | None,
    tenant: str,
    settings: Settings,
) -> SearchOptions:
    """Retrieval options with the caller's tenant forced into the filters."""
    top_k = None
    if max_results is not None:
        top_k = check_range(max_results, "max_results", low=1, high=settings.max_results_limit)
    merged = request_filters(filters, settings, tenant)
    return SearchOptions(mode=cast(Any, mode), top_k=top_k, filters=merged)
