"""Equality filters → SQL predicates that stores push down to their engine.

Chunk filters in the full syntax (operators, ``$and/$or/$not``, front-matter
keys) are parsed by :mod:`ragline.store.filter_ast` and compiled by
:mod:`ragline.store.filter_sql` (and each store's own compiler); this module keeps
the column registry, literal escaping and the equality form documents and
Chroma's ``where`` use.

A filter is a dict of equality tests (``{"tenant": "acme", "has_code": True}``).
Stores hand the predicate to their engine as a pre-filter (LanceDB ``where``,
PostgreSQL ``WHERE``), so top-k under a filter is exact and nothing is
post-filtered in Python. Field names are checked against the known columns and
values against the column's type, and every literal is escaped, so a filter
value can never change the shape of the SQL it ends up in.

The output is plain ANSI SQL that LanceDB (DataFusion) and PostgreSQL both read:
single-quoted strings with quotes doubled (backslashes are literal in both),
``true``/``false`` for booleans, and bare, validated column names.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from ragline.types import Filters, Scalar

#: Column name → the Python type its filter values must have. Text, list and
#: JSON columns that make no sense as equality tests are left out.
CHUNK_FILTER_FIELDS: Mapping[str, type] = {
    "id": str,
    "doc_id": str,
    "tenant": str,
    "source": str,
    "title": str,
    "chapter": str,
    "section": str,
    "url": str,
    "anchor": str,
    "chunk_index": int,
    "start_char": int,
    "end_char": int,
    "token_count": int,
    "word_count": int,
    "has_code": bool,
    "has_equations": bool,
    "content_hash": str,
    "created_at": str,
    "page": int,
}

#: Keys of a chunk's metadata JSON that filter like columns (no store adds a
#: column for them): each value must match its pattern, which keeps it free of
#: the quote and wildcard characters the JSON text match below could trip on.
CHUNK_METADATA_FILTERS: Mapping[str, re.Pattern[str]] = {
    "language": re.compile(r"^[a-z]{2,3}$"),
}


def metadata_filter_values(metadata: Mapping[str, object]) -> dict[str, str]:
    """The :data:`CHUNK_METADATA_FILTERS` keys a chunk's metadata holds as text, for
    a store to keep as keys of their own (so that they filter like columns)."""
    found = {name: metadata.get(name) for name in CHUNK_METADATA_FILTERS}
    return {name: value for name, value in found.items() if isinstance(value, str)}


#: Filterable columns of the documents table.
DOCUMENT_FILTER_FIELDS: Mapping[str, type] = {
    "doc_id": str,
    "tenant": str,
    "source": str,
    "file_hash": str,
    "chapter": str,
    "title": str,
    "format": str,
}

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Integer columns stored in 32 bits (the rest in 64): a value outside is refused
#: here, not by the engine with its SQL in the message.
INT32_FIELDS = frozenset({"chunk_index", "token_count", "word_count", "page"})


def sql_literal(value: Scalar) -> str:
    """One value as a SQL literal; strings have their single quotes doubled."""
    # bool first: it is a subclass of int.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"filter value {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("filter value contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates: no engine can store them
            raise ValueError(f"filter value {value!r} is not valid Unicode text") from exc
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"filter value {value!r} has unsupported type {type(value).__name__}")


def metadata_predicate(name: str, value: Scalar, jsonb: bool = False) -> str:
    """A test of one metadata key: ``metadata->>'name' = 'value'`` on PostgreSQL's
    jsonb, else ``"name": "value"`` found in the JSON text (``json.dumps`` with
    sorted keys writes ``": "``), which DataFusion matches without JSON functions.
    The value is checked against its pattern, so it needs no escaping."""
    pattern = CHUNK_METADATA_FILTERS[name]
    if not isinstance(value, str) or not pattern.match(value):
        raise ValueError(
            f"filter field {name!r} expects a value matching {pattern.pattern}, got {value!r}"
        )
    if jsonb:
        return f"metadata->>'{name}' = '{value}'"
    return f'metadata LIKE \'%"{name}": "{value}"%\''


def _check_field(name: str, value: Scalar, fields: Mapping[str, type]) -> None:
    if isinstance(value, Mapping | list) or (isinstance(name, str) and name.startswith("$")):
        raise ValueError(
            f"filter {name!r}: operators ($in, $gt, $or, …) are for chunk filters; "
            "this one takes equality on its fields"
        )
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"filter field {name!r} is not a valid column name")
    expected = fields.get(name)
    if expected is None:
        known = ", ".join(sorted([*fields, *CHUNK_METADATA_FILTERS]))
        raise ValueError(f"unknown filter field {name!r}; filterable fields: {known}")
    if expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, expected)
    if not ok:
        raise ValueError(
            f"filter field {name!r} expects {expected.__name__}, "
            f"got {type(value).__name__} {value!r}"
        )
    if expected is int:
        bits = 32 if name in INT32_FIELDS else 64
        # The range is symmetric: SQL reads ``-9223372036854775808`` as ``-`` applied
        # to a literal one past int64's top, which the engine refuses (it was a 503).
        if not -(2 ** (bits - 1)) < int(value) < 2 ** (bits - 1):
            raise ValueError(
                f"filter field {name!r}: {value} is outside the column's range "
                f"({bits}-bit integers, ±{2 ** (bits - 1) - 1})"
            )


def to_sql_predicate(
    filters: Filters | Mapping[str, Scalar] | None,
    fields: Mapping[str, type] = CHUNK_FILTER_FIELDS,
    jsonb: bool = False,
) -> str:
    """``field = literal`` tests joined with AND; ``""`` when there is nothing to filter.

    Raises ValueError naming the field for an unknown field or a value of the
    wrong type (``has_code="yes"``), instead of letting the engine guess. Keys
    of :data:`CHUNK_METADATA_FILTERS` test the ``metadata`` column (``jsonb``:
    PostgreSQL's type, else JSON text).
    """
    if not filters:
        return ""
    parts = []
    for name in sorted(filters):
        value = filters[name]
        if fields is CHUNK_FILTER_FIELDS and name in CHUNK_METADATA_FILTERS:
            parts.append(metadata_predicate(name, value, jsonb))
            continue
        _check_field(name, value, fields)
        parts.append(f"{name} = {sql_literal(value)}")
    return " AND ".join(parts)


def sql_in_list(column: str, values: Iterable[Scalar]) -> str:
    """``column IN (…)`` with escaped literals (``false`` for an empty list).

    ``column`` must be a plain identifier: it is checked, never escaped.
    """
    if not _IDENTIFIER.match(column):
        raise ValueError(f"{column!r} is not a valid column name")
    literals = [sql_literal(v) for v in values]
    if not literals:
        return "false"
    return f"{column} IN ({', '.join(literals)})"


def and_predicates(*predicates: str) -> str:
    """Non-empty predicates joined with AND, each parenthesised."""
    kept = [p for p in predicates if p]
    if len(kept) == 1:
        return kept[0]
    return " AND ".join(f"({p})" for p in kept)
