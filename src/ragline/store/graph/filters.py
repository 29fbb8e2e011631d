"""A filter tree (:mod:`ragline.store.filter_ast`) as a Cypher ``WHERE`` test on a
chunk node, every value a query parameter (never spliced into the text).

A chunk node carries its scalar front-matter values as ``fm_<key>`` properties
and the keys that have a value in ``fm_has`` (:func:`front_matter_properties`).
FalkorDB compares values of different types as null, so the tests are
type-strict as they stand; ``$not`` coalesces its operand to false first, so a
chunk without the key passes it. ``language`` keeps the property it had before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragline.store.filter_ast import METADATA_KEY, Cond, compile_boolean, parse
from ragline.store.filters import CHUNK_FILTER_FIELDS

_OWN_KEYS = frozenset({"language"})
_OPS = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_INT64 = 2**63


def front_matter_properties(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``fm_<key>`` for each scalar top-level value and ``fm_has``, the keys with a value
    (keys a filter can name only; a graph property cannot be null or hold a mapping)."""
    props: dict[str, Any] = {}
    present: list[str] = []
    for key, value in metadata.items():
        if not isinstance(key, str) or not METADATA_KEY.match(key) or value is None or value == []:
            continue
        present.append(key)
        if isinstance(value, bool | str | float) or (
            isinstance(value, int) and -_INT64 < value < _INT64
        ):
            props[f"fm_{key}"] = value
    if present:
        props["fm_has"] = sorted(present)
    return props


class _Compiler:
    def __init__(self, var: str) -> None:
        self.var = var
        self.params: dict[str, Any] = {}

    def param(self, value: Any) -> str:
        name = f"w{len(self.params)}"
        self.params[name] = value
        return f"${name}"

    def prop(self, cond: Cond) -> str:
        name = cond.field.name
        if cond.field.column is not None or name in _OWN_KEYS:
            return f"{self.var}.{name}"
        return f"{self.var}.`fm_{name}`"  # the key is checked: no backtick in it

    def cond(self, cond: Cond) -> str:
        prop = self.prop(cond)
        if cond.op == "exists":
            if cond.field.column is None and cond.field.name not in _OWN_KEYS:
                test = f"coalesce({self.param(cond.field.name)} IN {self.var}.fm_has, false)"
            else:
                test = f"{prop} IS NOT NULL"
            return test if cond.value else f"NOT {test}"
        if cond.op in ("in", "nin"):
            hits = " OR ".join(f"{prop} = {self.param(v)}" for v in cond.value) or "false"
            if cond.op == "in":
                return f"({hits})"
            return f"({prop} IS NOT NULL AND NOT coalesce(({hits}), false))"
        if cond.op == "ne":
            return (
                f"({prop} IS NOT NULL AND NOT coalesce({prop} = {self.param(cond.value)}, false))"
            )
        return f"{prop} {_OPS[cond.op]} {self.param(cond.value)}"


def chunk_where(
    filters: Mapping[str, Any] | None, var: str = "c"
) -> tuple[list[str], dict[str, Any]]:
    """The tests (ANDed by the caller) and parameters of a chunk filter."""
    node = parse(filters, CHUNK_FILTER_FIELDS) if filters else None
    if node is None:
        return [], {}
    compiler = _Compiler(var)
    return [compile_boolean(node, compiler.cond)], compiler.params
