"""Metadata filters: the JSON syntax parsed once into a small typed tree.

The syntax is the one users know from LlamaIndex and Haystack, written as JSON
(the same in Python, ``--where``, HTTP and MCP)::

    {"chapter": "Guides"}                               # equality (the old form)
    {"version": {"$gte": 2, "$lt": 3}}                  # operators on one key
    {"$or": [{"status": "draft"}, {"reviewed": false}]}
    {"$not": {"tags_checked": {"$exists": true}}}

Top-level keys are ANDed. Operators: ``$eq $ne $in $nin $gt $gte $lt $lte
$exists`` on a key, ``$and $or`` (non-empty lists) and ``$not`` (one filter).
A key is a chunk field (:data:`~ragline.store.filters.CHUNK_FILTER_FIELDS`) or
else any key of the chunk's metadata (a document's front matter);
``metadata.<key>`` names a metadata key that a chunk field shadows.

Semantics every store keeps (checked by the store contract suite):

* comparisons are type-strict: a number matches numbers, a string strings, a
  boolean booleans; a metadata value that is a list or an object never matches;
* ``$ne`` and ``$nin`` match only chunks whose key holds a string, number or
  boolean (as SQL's ``<>`` skips NULL);
  ``$not`` is the full complement (chunks without the key pass it);
* ``$exists: true``: the key is there with a value that is not null (nor an
  empty list, which Qdrant cannot tell from a missing key);
* dates are ISO-8601 strings compared as dates: the filter's are normalised like
  the front matter's are at ingest (a timestamp to UTC, ``+00:00``; a naive one
  is read as UTC; a date stays ``YYYY-MM-DD``), so the text order is the time
  order and a date sorts as its midnight. Range operators on text take ASCII
  without quotes or backslashes (dates, versions, codes): their order is the
  same in every engine.

Every error is a :class:`FilterError` naming the key and the operator.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ragline.store.filters import CHUNK_FILTER_FIELDS, INT32_FIELDS
from ragline.types import Scalar

Op = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "exists"]
COMPARISONS: frozenset[str] = frozenset({"eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"})
RANGES: frozenset[str] = frozenset({"gt", "gte", "lt", "lte"})
_FIELD_OPS: frozenset[str] = frozenset({*COMPARISONS, "exists"})
_LOGICAL = ("$and", "$or", "$not")

#: A metadata key a filter may name: letters, digits, ``_`` and ``-``, as front
#: matter keys are written (every store can address it without quoting games).
METADATA_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
METADATA_PREFIX = "metadata."
#: Nesting of ``$and/$or/$not`` a filter may use.
MAX_DEPTH = 8

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$"
)
_RANGE_TEXT = re.compile(r"^[\x20-\x7e]*$")


class FilterError(ValueError):
    """A filter that cannot be read; ``key`` and ``operator`` say where (HTTP 400)."""

    def __init__(self, key: str, operator: str, problem: str) -> None:
        where = f"filter {key!r}" if key else "filter"
        if operator:
            where += f" {operator}"
        super().__init__(f"{where}: {problem}")
        self.key = key
        self.operator = operator
        self.problem = problem


@dataclass(frozen=True)
class Field:
    """What a condition tests: a chunk column (``column`` set) or a metadata key."""

    name: str
    column: type | None = None  # the column's Python type; None for a metadata key

    @property
    def label(self) -> str:
        return self.name if self.column is not None else f"{METADATA_PREFIX}{self.name}"


@dataclass(frozen=True)
class Cond:
    """One test of one field. ``value``: a scalar; a tuple for ``in``/``nin``; a
    bool for ``exists``."""

    field: Field
    op: Op
    value: Any


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    child: Node


Node = Cond | And | Or | Not


def normalise_date(text: str) -> str:
    """An ISO-8601 date or timestamp as stored and compared: a date as is, a
    timestamp in UTC with ``+00:00`` (naive ones read as UTC); other text as is."""
    if _DATE.match(text):
        try:
            dt.date.fromisoformat(text)
        except ValueError:
            return text
        return text
    if _TIMESTAMP.match(text):
        try:
            stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text
        return datetime_text(stamp)
    return text


def datetime_text(stamp: dt.datetime) -> str:
    """A timestamp as filters compare it: UTC, ISO-8601, ``+00:00``."""
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.astimezone(dt.UTC).isoformat()


def _field(key: Any, columns: Mapping[str, type]) -> Field:
    if not isinstance(key, str):
        raise FilterError(str(key), "", "a key must be a string")
    if key.startswith(METADATA_PREFIX):
        name = key[len(METADATA_PREFIX) :]
    elif key in columns:
        return Field(key, columns[key])
    else:
        name = key
    if not METADATA_KEY.match(name):
        raise FilterError(
            key,
            "",
            "not a chunk field nor a metadata key (letters, digits, _ and -, starting "
            "with a letter or _, at most 64)",
        )
    return Field(name)


def _scalar(key: str, op: str, value: Any, field: Field) -> Scalar:
    """``value`` checked for ``field`` (column type, finite number, clean text) and
    normalised (an integral float on an int column, a date)."""
    if isinstance(value, bool):
        pass
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise FilterError(key, op, f"{value!r} is not a finite number")
        if field.column is int and value.is_integer():
            value = int(value)
    elif isinstance(value, str):
        if "\x00" in value:
            raise FilterError(key, op, "the value contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise FilterError(key, op, f"{value!a} is not valid Unicode text") from None
        if field.column is None:  # a column holds what it holds; front matter is normalised
            value = normalise_date(value)
    elif not isinstance(value, int):
        kind = "null" if value is None else type(value).__name__
        raise FilterError(key, op, f"expects a string, number or boolean, got {kind}")
    column = field.column
    if column is not None:
        if column is bool:
            ok = isinstance(value, bool)
        elif column is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, column)
        if not ok:
            raise FilterError(
                key, op, f"expects {column.__name__}, got {type(value).__name__} {value!r}"
            )
    if isinstance(value, int) and not isinstance(value, bool):
        bits = 32 if field.name in INT32_FIELDS and column is int else 64
        # symmetric: SQL reads the lowest int64 as ``-`` applied to one past the top
        if not -(2 ** (bits - 1)) < value < 2 ** (bits - 1):
            raise FilterError(key, op, f"{value} is outside the range of {bits}-bit integers")
    if op.lstrip("$") in RANGES:
        if isinstance(value, bool):
            raise FilterError(key, op, "booleans have no order; use $eq or $ne")
        if isinstance(value, str) and (
            not _RANGE_TEXT.match(value) or '"' in value or "\\" in value
        ):
            raise FilterError(
                key, op, "compares text as ASCII without quotes or backslashes (dates, versions)"
            )
    checked: Scalar = value
    return checked


def _field_ops(key: str, field: Field, spec: Mapping[Any, Any]) -> Node:
    if not spec:
        raise FilterError(key, "", "an operator object needs at least one operator")
    conds: list[Node] = []
    for raw_op, value in sorted(spec.items(), key=lambda kv: str(kv[0])):
        op = str(raw_op)
        name = op[1:] if op.startswith("$") else ""
        if name not in _FIELD_OPS:
            raise FilterError(
                key, op, "unknown operator; use $eq $ne $in $nin $gt $gte $lt $lte $exists"
            )
        if name == "exists":
            if not isinstance(value, bool):
                raise FilterError(key, op, "expects true or false")
            conds.append(Cond(field, "exists", value))
        elif name in ("in", "nin"):
            if not isinstance(value, list):
                raise FilterError(key, op, "expects a list of values")
            items = tuple(dict.fromkeys(_scalar(key, op, v, field) for v in value))
            conds.append(Cond(field, name, items))  # type: ignore[arg-type]
        else:
            conds.append(Cond(field, name, _scalar(key, op, value, field)))  # type: ignore[arg-type]
    return conds[0] if len(conds) == 1 else And(tuple(conds))


def parse(
    filters: Mapping[str, Any] | None,
    columns: Mapping[str, type] | None = None,
    *,
    _depth: int = 0,
) -> Node | None:
    """The tree of a JSON filter (None when there is nothing to filter).

    Raises :class:`FilterError` naming the key and operator at fault."""
    if columns is None:
        columns = CHUNK_FILTER_FIELDS
    if filters is None:
        return None
    if not isinstance(filters, Mapping):
        raise FilterError("", "", f"a filter is a JSON object, got {type(filters).__name__}")
    if _depth > MAX_DEPTH:
        raise FilterError("", "", f"nested deeper than {MAX_DEPTH} levels of $and/$or/$not")
    parts: list[Node] = []
    for key in sorted(filters, key=str):
        value = filters[key]
        if isinstance(key, str) and key.startswith("$"):
            if key not in _LOGICAL:
                raise FilterError(key, key, "unknown operator; use $and, $or or $not at this level")
            if key == "$not":
                if not isinstance(value, Mapping):
                    raise FilterError(key, key, "expects one filter object")
                child = parse(value, columns, _depth=_depth + 1)
                if child is None:
                    raise FilterError(key, key, "expects a non-empty filter object")
                parts.append(Not(child))
                continue
            if not isinstance(value, list) or not value:
                raise FilterError(key, key, "expects a non-empty list of filter objects")
            kids: list[Node] = []
            for item in value:
                if not isinstance(item, Mapping):
                    raise FilterError(key, key, "expects a list of filter objects")
                node = parse(item, columns, _depth=_depth + 1)
                if node is None:
                    raise FilterError(key, key, "expects non-empty filter objects")
                kids.append(node)
            parts.append(Or(tuple(kids)) if key == "$or" else And(tuple(kids)))
            continue
        field = _field(key, columns)
        if isinstance(value, Mapping):
            parts.append(_field_ops(str(key), field, value))
        elif isinstance(value, list):
            raise FilterError(str(key), "", 'a list needs an operator: use {"$in": [...]}')
        else:
            parts.append(Cond(field, "eq", _scalar(str(key), "$eq", value, field)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def conditions(node: Node | None) -> list[Cond]:
    """Every condition of the tree (to count them against a limit)."""
    if node is None:
        return []
    if isinstance(node, Cond):
        return [node]
    if isinstance(node, Not):
        return conditions(node.child)
    return [c for child in node.children for c in conditions(child)]


def value_count(node: Node | None) -> int:
    """Values the tree compares against (each ``$in`` item counts)."""
    return sum(len(c.value) if c.op in ("in", "nin") else 1 for c in conditions(node))


def is_equality(node: Node | None) -> bool:
    """True for the old form: column equality tests ANDed (what every store reads)."""
    if node is None:
        return True
    if isinstance(node, And):
        return all(is_equality(c) for c in node.children)
    return isinstance(node, Cond) and node.op == "eq"


def compile_boolean(node: Node, leaf: Callable[[Cond], str]) -> str:
    """``node`` as predicate text in the syntax SQL and Cypher share, ``leaf`` writing
    each condition: operands parenthesised, ``$not`` as ``NOT coalesce((…), false)``
    (a null operand, a missing key, passes it, as the semantics above say)."""
    if isinstance(node, And):
        return " AND ".join(f"({compile_boolean(c, leaf)})" for c in node.children)
    if isinstance(node, Or):
        return " OR ".join(f"({compile_boolean(c, leaf)})" for c in node.children)
    if isinstance(node, Not):
        return f"NOT coalesce(({compile_boolean(node.child, leaf)}), false)"
    return leaf(node)


# -------------------------------------------------------------- evaluation


def _same_type(a: Any, b: Any) -> bool:
    """Type-strict: bool with bool, number with number, str with str."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, int | float) or isinstance(b, int | float):
        return isinstance(a, int | float) and isinstance(b, int | float)
    return isinstance(a, str) and isinstance(b, str)


def _present(value: Any) -> bool:
    return value is not None and value != []


def matches_value(cond: Cond, value: Any, present: bool) -> bool:
    """Whether a chunk whose field holds ``value`` (``present``: it has the key)
    passes ``cond``: the reference semantics the store compilers implement."""
    if cond.op == "exists":
        return bool((present and _present(value)) == cond.value)
    if not present or not _present(value) or isinstance(value, list | dict):
        return False
    if cond.op in ("in", "nin"):
        hit = any(_same_type(value, v) and value == v for v in cond.value)
        return hit if cond.op == "in" else not hit
    target = cond.value
    if cond.op == "eq":
        return _same_type(value, target) and value == target
    if cond.op == "ne":
        return not (_same_type(value, target) and value == target)
    if not _same_type(value, target) or isinstance(value, bool):
        return False
    if cond.op == "gt":
        return bool(value > target)
    if cond.op == "gte":
        return bool(value >= target)
    if cond.op == "lt":
        return bool(value < target)
    return bool(value <= target)


def evaluate(node: Node | None, row: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether a chunk (its columns in ``row``, its ``metadata``) passes ``node``:
    for filtering in Python (the popular-answers cache) and as the tests' reference."""
    if node is None:
        return True
    if isinstance(node, And):
        return all(evaluate(c, row, metadata) for c in node.children)
    if isinstance(node, Or):
        return any(evaluate(c, row, metadata) for c in node.children)
    if isinstance(node, Not):
        return not evaluate(node.child, row, metadata)
    source = row if node.field.column is not None else metadata
    present = node.field.name in source
    return matches_value(node, source.get(node.field.name), present)
