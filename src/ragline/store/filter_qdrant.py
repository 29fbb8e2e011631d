"""A filter tree (:mod:`ragline.store.filter_ast`) as a Qdrant ``models.Filter``.

Qdrant filters payload, so a chunk's point carries its front matter in three
payload keys besides the JSON text (:func:`front_matter_payload`):

* ``fm``: the top-level keys whose value is a string, number or boolean (a list
  in Qdrant would match any of its items, which the filter semantics refuse);
* ``fm_has``: the keys that are there with a value (not null, not ``[]``), for
  ``$exists``;
* ``fm_t``: ISO dates and timestamps as epoch seconds, for date ranges: Qdrant
  orders numbers only, so a range on text is a range on dates here and other
  text under that key does not match (the SQL stores would order it as text).

``$and/$or/$not`` become nested filters (``must``/``should``/``must_not``),
``$ne``/``$nin`` a scalar-present test plus ``must_not``. Numbers compare with
``Range`` (Qdrant keeps booleans out of ranges, so types stay strict). The
``language`` key keeps its own payload key, which indexes written before the
``fm`` keys already have.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from qdrant_client import models

from ragline.store.filter_ast import RANGES, And, Cond, Node, Not, Or, normalise_date, parse
from ragline.store.filters import CHUNK_FILTER_FIELDS

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}(\.\d+)?\+00:00)?$")
#: Metadata keys kept as their own payload key since before the ``fm`` keys.
_OWN_KEYS = frozenset({"language"})


def epoch(text: str) -> float | None:
    """Seconds since 1970 of a normalised ISO date (its midnight, UTC) or timestamp."""
    value = normalise_date(text)
    if not _ISO.match(value):
        return None
    try:
        if len(value) == 10:
            return dt.datetime.combine(dt.date.fromisoformat(value), dt.time(), dt.UTC).timestamp()
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def front_matter_payload(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The ``fm``, ``fm_has`` and ``fm_t`` payload keys of a chunk's metadata."""
    scalars: dict[str, Any] = {}
    present: list[str] = []
    dates: dict[str, float] = {}
    for key, value in metadata.items():
        if value is None or value == []:
            continue
        present.append(key)
        if isinstance(value, str | int | float | bool):
            scalars[key] = value
        if isinstance(value, str):
            seconds = epoch(value) if value == normalise_date(value) else None
            if seconds is not None:
                dates[key] = seconds
    return {"fm": scalars, "fm_has": sorted(present), "fm_t": dates}


def _key(cond: Cond) -> str:
    name = cond.field.name
    if cond.field.column is not None or name in _OWN_KEYS:
        return name
    return f"fm.{name}"


def _is_empty(key: str) -> models.Condition:
    return models.IsEmptyCondition(is_empty=models.PayloadField(key=key))


def _present(cond: Cond) -> models.Filter:
    """The field holds a value (``$exists``)."""
    if cond.field.column is None and cond.field.name not in _OWN_KEYS:
        match = models.MatchValue(value=cond.field.name)
        return models.Filter(must=[models.FieldCondition(key="fm_has", match=match)])
    return models.Filter(must_not=[_is_empty(cond.field.name)])


def _scalar(cond: Cond) -> models.Filter:
    """The field holds a string, number or boolean (``$ne``/``$nin`` need one)."""
    return models.Filter(must_not=[_is_empty(_key(cond))])


def _eq(key: str, value: Any) -> models.Condition:
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        return models.FieldCondition(key=key, range=models.Range(gte=number, lte=number))
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _nothing() -> models.Filter:
    return models.Filter(must=[_is_empty("id")], must_not=[_is_empty("id")])


def _cond(cond: Cond) -> models.Filter:
    key = _key(cond)
    if cond.op == "exists":
        present = _present(cond)
        return present if cond.value else models.Filter(must_not=[present])
    if cond.op in ("in", "nin"):
        values = cond.value
        if not values:
            return _nothing() if cond.op == "in" else _scalar(cond)
        hits: list[models.Condition] = [_eq(key, v) for v in values]
        if cond.op == "in":
            return models.Filter(should=hits)
        return models.Filter(must=[_scalar(cond)], must_not=hits)
    value = cond.value
    if cond.op == "eq":
        return models.Filter(must=[_eq(key, value)])
    if cond.op == "ne":
        return models.Filter(must=[_scalar(cond)], must_not=[_eq(key, value)])
    assert cond.op in RANGES
    bound = {cond.op: value}
    if isinstance(value, str):
        seconds = epoch(value)
        if seconds is None or cond.field.column is not None:
            raise ValueError(
                f"filter {cond.field.label!r} ${cond.op}: Qdrant orders text only when it "
                "is an ISO date or timestamp in the front matter"
            )
        bound = {cond.op: seconds}
        key = f"fm_t.{cond.field.name}"
    return models.Filter(must=[models.FieldCondition(key=key, range=models.Range(**bound))])


def compile_filter(node: Node) -> models.Filter:
    if isinstance(node, And):
        return models.Filter(must=[compile_filter(c) for c in node.children])
    if isinstance(node, Or):
        return models.Filter(should=[compile_filter(c) for c in node.children])
    if isinstance(node, Not):
        return models.Filter(must_not=[compile_filter(node.child)])
    return _cond(node)


def chunk_filter(filters: Mapping[str, Any] | None) -> models.Filter | None:
    """A chunk filter as a Qdrant filter whose ``must`` holds it all (so it ANDs
    with others by concatenating ``must``); None for no filter."""
    node = parse(filters, CHUNK_FILTER_FIELDS) if filters else None
    if node is None:
        return None
    return models.Filter(must=[compile_filter(node)])
