"""A filter tree (:mod:`ragline.store.filter_ast`) as a SQL predicate.

Two dialects read the chunk's metadata differently:

* ``postgres``: ``metadata`` is jsonb: ``metadata->'key'`` compared as jsonb
  (type-strict by itself), ranges guarded by ``jsonb_typeof`` and text ranges
  in the ``C`` collation (byte order, as the other engines);
* ``datafusion`` (LanceDB): ``metadata`` is the JSON text of
  :func:`ragline.store.base.metadata_json` (sorted keys, ASCII, ``", "`` and
  ``": "``). DataFusion's JSON functions read only Lance's binary JSON type, so a
  key is found with a regular expression anchored at the start of the object
  that steps over the keys before it (:func:`key_prefix`): only a top-level key
  matches, never the same name inside a nested object. Values before the key
  may nest up to :data:`NESTING` levels; past that the key is not found (a miss,
  never a false match).

Every leaf is two-valued by construction except where SQL's NULL creeps in (a
missing key, a NULL column); ``$not`` coalesces its operand to false first, so a
chunk without the key passes ``$not`` as the reference semantics say. Literals
are escaped by :func:`ragline.store.filters.sql_literal`; keys are validated
identifiers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from ragline.store.filter_ast import RANGES, Cond, Node, compile_boolean, parse
from ragline.store.filters import CHUNK_FILTER_FIELDS, sql_literal

Dialect = Literal["datafusion", "postgres", "sqlite"]

_SQL_OPS = {"eq": "=", "ne": "<>", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

# ---- regular expressions over sorted, ASCII JSON text (LanceDB)

_STR = r'"(?:[^"\\]|\\.)*"'
_ATOM = r"[^\[\]{}\"]"
#: Levels of nesting a value before the wanted key may be stepped over (front
#: matter rarely goes past two). In valid JSON brackets pair up, so one pattern
#: covers both kinds and its size grows linearly with the depth.
NESTING = 8


def _containers(depth: int) -> str:
    inner = f"{_ATOM}|{_STR}" + (f"|{_containers(depth - 1)}" if depth > 1 else "")
    return rf"[\[{{](?:{inner})*[\]}}]"


_VALUE = rf"(?:{_STR}|[-+.0-9A-Za-z]+|{_containers(NESTING)})"
_NUMBER = r"(-?[0-9][-+.0-9eE]*)"


def _rx_escape(text: str) -> str:
    """``text`` as a literal in a Rust regex (which refuses Python's escaped spaces)."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


def key_prefix(key: str) -> str:
    """A pattern that matches from the start of the JSON text to just after
    ``"key": `` when ``key`` is a top-level key."""
    return rf"^\{{(?:{_STR}: {_VALUE}, )*{_rx_escape(json.dumps(key))}: "


def _regex_like(pattern: str) -> str:
    return f"regexp_like(metadata, {sql_literal(pattern)})"


def _regex_value(pattern: str) -> str:
    return f"regexp_match(metadata, {sql_literal(pattern)})[1]"


def _df_scalar(cond: Cond) -> str:
    """The key holds a string, number or boolean (what ``$ne``/``$nin`` need)."""
    return _regex_like(key_prefix(cond.field.name) + r'["0-9tfNI-]')


def _df_metadata(cond: Cond) -> str:
    prefix = key_prefix(cond.field.name)
    if cond.op == "exists":
        present = _regex_like(prefix + r"(?:[^n\[]|\[[^\]])")  # not null, not []
        return present if cond.value else f"NOT {present}"
    if cond.op in ("in", "nin"):
        values = cond.value
        if not values:
            return "false" if cond.op == "in" else _df_scalar(cond)
        hit = " OR ".join(_df_metadata(Cond(cond.field, "eq", v)) for v in values)
        if cond.op == "in":
            return f"({hit})"
        return f"({_df_scalar(cond)} AND NOT COALESCE(({hit}), false))"
    value = cond.value
    if isinstance(value, bool):
        literal = "true" if value else "false"
        like = _regex_like(prefix + literal + "[,}]")
        if cond.op == "eq":
            return like
        return f"({_df_scalar(cond)} AND NOT {like})"
    if isinstance(value, int | float):
        number = f"CAST({_regex_value(prefix + _NUMBER + '[,}]')} AS DOUBLE)"
        if cond.op == "ne":  # other types differ too
            eq = f"COALESCE({number} = {sql_literal(float(value))}, false)"
            return f"({_df_scalar(cond)} AND NOT {eq})"
        return f"{number} {_SQL_OPS[cond.op]} {sql_literal(float(value))}"
    text = json.dumps(value)  # the stored (escaped, ASCII) form
    if cond.op in ("eq", "ne"):
        like = _regex_like(prefix + _rx_escape(text) + "[,}]")
        if cond.op == "eq":
            return like
        return f"({_df_scalar(cond)} AND NOT {like})"
    stored = _regex_value(prefix + r'"((?:[^"\\]|\\.)*)"')
    return f"{stored} {_SQL_OPS[cond.op]} {sql_literal(text[1:-1])}"


def _pg_metadata(cond: Cond) -> str:
    ref = f"(metadata->{sql_literal(cond.field.name)})"
    scalar = f"COALESCE(jsonb_typeof({ref}) IN ('string', 'number', 'boolean'), false)"
    if cond.op == "exists":
        present = f"COALESCE(jsonb_typeof({ref}) <> 'null' AND {ref} <> '[]'::jsonb, false)"
        return present if cond.value else f"NOT {present}"
    if cond.op in ("in", "nin"):
        values = cond.value
        if not values:
            return "false" if cond.op == "in" else scalar
        items = ", ".join(f"{sql_literal(json.dumps(v))}::jsonb" for v in values)
        if cond.op == "in":
            return f"{ref} IN ({items})"
        return f"({scalar} AND {ref} NOT IN ({items}))"
    value = cond.value
    jvalue = f"{sql_literal(json.dumps(value))}::jsonb"
    if cond.op == "eq":
        return f"{ref} = {jvalue}"
    if cond.op == "ne":
        return f"({scalar} AND {ref} <> {jvalue})"
    op = _SQL_OPS[cond.op]
    if isinstance(value, str):
        text = f"(metadata->>{sql_literal(cond.field.name)})"
        return (
            f"(jsonb_typeof({ref}) = 'string' AND {text} COLLATE \"C\" {op} {sql_literal(value)})"
        )
    return f"(jsonb_typeof({ref}) = 'number' AND {ref} {op} {jvalue})"


def _sqlite_metadata(cond: Cond) -> str:
    """SQLite's JSON1 on the JSON text: ``json_type`` keeps the tests type-strict
    (``'true'``/``'false'`` for booleans), text compares in byte order (BINARY)."""
    path = sql_literal(f'$."{cond.field.name}"')
    kind = f"json_type(metadata, {path})"
    value_of = f"json_extract(metadata, {path})"
    scalar = f"COALESCE({kind} IN ('integer', 'real', 'text', 'true', 'false'), 0)"
    if cond.op == "exists":
        present = (
            f"COALESCE({kind} <> 'null' AND NOT ({kind} = 'array' AND "
            f"json_array_length(metadata, {path}) = 0), 0)"
        )
        return present if cond.value else f"NOT {present}"

    def eq(value: Any) -> str:
        if isinstance(value, bool):
            return f"COALESCE({kind} = {sql_literal('true' if value else 'false')}, 0)"
        if isinstance(value, int | float):
            return (
                f"COALESCE({kind} IN ('integer', 'real') AND {value_of} = {sql_literal(value)}, 0)"
            )
        return f"COALESCE({kind} = 'text' AND {value_of} = {sql_literal(value)}, 0)"

    if cond.op in ("in", "nin"):
        hits = " OR ".join(eq(v) for v in cond.value) or "0"
        if cond.op == "in":
            return f"({hits})"
        return f"({scalar} AND NOT ({hits}))"
    if cond.op == "eq":
        return eq(cond.value)
    if cond.op == "ne":
        return f"({scalar} AND NOT {eq(cond.value)})"
    value = cond.value
    want = "'text'" if isinstance(value, str) else "'integer', 'real'"
    compare = f"{value_of} {_SQL_OPS[cond.op]} {sql_literal(value)}"
    return f"COALESCE({kind} IN ({want}) AND {compare}, 0)"


def _column(cond: Cond, dialect: Dialect) -> str:
    name = cond.field.name
    if cond.op == "exists":
        return f"{name} IS NOT NULL" if cond.value else f"{name} IS NULL"
    if cond.op in ("in", "nin"):
        values = cond.value
        if not values:
            return "false" if cond.op == "in" else f"{name} IS NOT NULL"
        items = ", ".join(sql_literal(v) for v in values)
        return f"{name} {'IN' if cond.op == 'in' else 'NOT IN'} ({items})"
    column = name
    if dialect == "postgres" and cond.op in RANGES and isinstance(cond.value, str):
        column = f'{name} COLLATE "C"'
    return f"{column} {_SQL_OPS[cond.op]} {sql_literal(cond.value)}"


def compile_sql(node: Node | None, dialect: Dialect) -> str:
    """``node`` as a SQL predicate for ``dialect``; ``""`` for no filter."""
    if node is None:
        return ""
    return compile_boolean(node, lambda cond: _leaf(cond, dialect))


def _leaf(node: Cond, dialect: Dialect) -> str:
    if node.field.column is not None:
        return _column(node, dialect)
    if dialect == "postgres":
        return _pg_metadata(node)
    if dialect == "sqlite":
        return _sqlite_metadata(node)
    return _df_metadata(node)


def chunk_predicate(filters: Mapping[str, Any] | None, dialect: Dialect) -> str:
    """A chunk filter (any syntax of :mod:`ragline.store.filter_ast`) as a SQL
    predicate for ``dialect``; ``""`` when there is nothing to filter. Raises
    FilterError (a ValueError) naming the key and operator."""
    if not filters:
        return ""
    return compile_sql(parse(filters, CHUNK_FILTER_FIELDS), dialect)
