"""Metadata filters from a caller (HTTP body, MCP tool argument, ``--where``):
parsed once by :mod:`ragline.store.filter_ast`, held to the request limits, and,
for a server, with the caller's tenant forced in (pure functions)."""

from __future__ import annotations

import json
from typing import Any

from ragline.settings import Settings
from ragline.store.filter_ast import FilterError, conditions, parse, value_count
from ragline.types import Filters
from ragline.validation import RequestProblem, is_unicode


def request_filters(
    filters: Any, settings: Settings, tenant: str | None = None, field: str = "filters"
) -> Filters:
    """``filters`` checked (a :class:`RequestProblem`, a 400, naming the key and
    operator at fault, with ``field`` = ``filters.<key>``) and, with ``tenant``,
    that tenant ANDed in in place of any the caller gave at the top level."""
    if filters is None:
        filters = {}
    if not isinstance(filters, dict):
        raise RequestProblem(
            f"{field}: a filter is a JSON object, got {type(filters).__name__}", field=field
        )
    merged: Filters = dict(filters)
    if tenant is not None:
        merged.pop("tenant", None)  # never the caller's choice
    for key in merged:
        if isinstance(key, str) and not is_unicode(key):
            raise RequestProblem(
                f"{field}: the key {key!a} is not valid Unicode text (a lone surrogate)",
                field=f"{field}.{ascii(key)[1:-1]}",
            )
    try:
        tree = parse(merged)
    except FilterError as e:
        where = f"{field}.{e.key}" if e.key and not e.key.startswith("$") else field
        raise RequestProblem(f"{where}: {e}", field=where) from None
    count = len(conditions(tree))
    if count > settings.max_filters:
        raise RequestProblem(
            f"at most {settings.max_filters} filter conditions are allowed, got {count}",
            field=field,
        )
    values = value_count(tree)
    if values > settings.max_filter_values:
        raise RequestProblem(
            f"filters compare against at most {settings.max_filter_values} values, got {values}",
            field=field,
        )
    if tenant is not None:
        merged["tenant"] = tenant
    return merged


def filters_from_json(text: str, settings: Settings, field: str = "--where") -> Filters:
    """A filter written as JSON text (the command line's ``--where``)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestProblem(
            f"{field}: not JSON ({e.msg} at column {e.colno})", field=field
        ) from None
    return request_filters(value, settings, field=field)
