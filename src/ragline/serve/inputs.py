"""Request fields turned into engine arguments: cleaned text and retrieval options
with the caller's tenant forced into the filters (pure functions)."""

from __future__ import annotations

from typing import Any, cast

from ragline.answer.answerer import SearchOptions
from ragline.serve import schemas as s
from ragline.settings import Settings
from ragline.store.filters import CHUNK_FILTER_FIELDS, to_sql_predicate
from ragline.types import Filters
from ragline.validation import RequestProblem, check_range, clean_field


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


def json_integer(field: str, value: s.FilterValue) -> s.FilterValue:
    """An integer field's value written with a fraction of zero (``3.0``) as the integer
    it is: JSON has one number type, and JSON Schema's ``integer`` (what the OpenAPI
    schema promises) accepts it."""
    if CHUNK_FILTER_FIELDS.get(field) is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _is_unicode(text: str) -> bool:
    """False for a lone surrogate (JSON ``"\\ud800"``): no response body can carry it back."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
    merged: Filters = {k: json_integer(k, v) for k, v in (filters or {}).items()}
    if len(merged) > settings.max_filters:
        raise RequestProblem(
            f"at most {settings.max_filters} filters are allowed, got {len(merged)}",
            field="filters",
        )
    merged.pop("tenant", None)  # never the user's choice
    for key, value in merged.items():  # one at a time, to name the one at fault
        if not _is_unicode(key):
            raise RequestProblem(
                f"filters: the key {key!a} is not valid Unicode text (a lone surrogate)",
                field=f"filters.{ascii(key)[1:-1]}",
            )
        try:
            to_sql_predicate({key: value})
        except (ValueError, TypeError) as e:
            raise RequestProblem(f"filters.{key}: {e}", field=f"filters.{key}") from None
    merged["tenant"] = tenant
    return SearchOptions(mode=cast(Any, mode), top_k=top_k, filters=merged)
