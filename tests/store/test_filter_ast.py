"""The filter syntax: parsing, the errors that name key and operator, dates, and
the reference evaluator the stores are checked against."""

from __future__ import annotations

from typing import Any

import pytest

from ragline.store.filter_ast import (
    And,
    Cond,
    FilterError,
    Not,
    Or,
    conditions,
    evaluate,
    is_equality,
    normalise_date,
    parse,
    value_count,
)


def test_plain_dict_is_equality_on_columns_and_metadata() -> None:
    node = parse({"chapter": "Guides", "year": 2024})
    assert isinstance(node, And)
    (a, b) = node.children
    assert (a.field.name, a.field.column, a.op, a.value) == ("chapter", str, "eq", "Guides")
    assert (b.field.name, b.field.column, b.op, b.value) == ("year", None, "eq", 2024)
    assert is_equality(node)
    assert parse({}) is None and parse(None) is None


def test_operators_and_logic() -> None:
    node = parse(
        {
            "$or": [{"v": {"$gte": 2, "$lt": 3}}, {"$not": {"tag": {"$exists": True}}}],
            "page": {"$in": [1, 2.0, 1]},
        }
    )
    assert isinstance(node, And)
    orn, page = node.children
    assert isinstance(orn, Or) and isinstance(orn.children[1], Not)
    assert isinstance(page, Cond) and page.value == (1, 2)  # 2.0 on an int column, deduplicated
    assert [c.op for c in conditions(node)] == ["gte", "lt", "exists", "in"]
    assert value_count(node) == 5
    assert not is_equality(node)


def test_metadata_prefix_reaches_a_shadowed_key() -> None:
    node = parse({"metadata.title": "x"})
    assert isinstance(node, Cond) and node.field.column is None and node.field.name == "title"
    assert node.field.label == "metadata.title"


@pytest.mark.parametrize(
    ("filters", "key", "op", "problem"),
    [
        ({"v": {"$like": "x"}}, "v", "$like", "unknown operator"),
        ({"$nor": []}, "$nor", "$nor", "unknown operator"),
        ({"v": {"$in": "a"}}, "v", "$in", "list of values"),
        ({"v": {"$gt": True}}, "v", "$gt", "booleans have no order"),
        ({"v": {"$gt": None}}, "v", "$gt", "got null"),
        ({"v": {"$exists": "yes"}}, "v", "$exists", "true or false"),
        ({"v": {"$lt": "é"}}, "v", "$lt", "ASCII"),
        ({"v": {"$eq": float("nan")}}, "v", "$eq", "finite"),
        ({"v": [1, 2]}, "v", "", "needs an operator"),
        ({"v": {}}, "v", "", "at least one operator"),
        ({"$or": []}, "$or", "$or", "non-empty list"),
        ({"$not": [{"v": 1}]}, "$not", "$not", "one filter object"),
        ({"has_code": {"$ne": "yes"}}, "has_code", "$ne", "expects bool"),
        ({"page": {"$gte": 2**40}}, "page", "$gte", "32-bit"),
        ({"bad key": 1}, "bad key", "", "not a chunk field nor a metadata key"),
        ({"v": {"$eq": {"a": 1}}}, "v", "$eq", "got dict"),
    ],
)
def test_errors_name_key_and_operator(
    filters: dict[str, Any], key: str, op: str, problem: str
) -> None:
    with pytest.raises(FilterError) as info:
        parse(filters)
    assert (info.value.key, info.value.operator) == (key, op)
    assert problem in str(info.value)
    assert repr(key) in str(info.value)


def test_too_deep_is_refused() -> None:
    deep: dict[str, Any] = {"v": 1}
    for _ in range(10):
        deep = {"$not": deep}
    with pytest.raises(FilterError, match="deeper"):
        parse(deep)


def test_dates_are_normalised_to_utc() -> None:
    assert normalise_date("2024-05-01") == "2024-05-01"
    assert normalise_date("2024-05-01T12:00:00+02:00") == "2024-05-01T10:00:00+00:00"
    assert normalise_date("2024-05-01T10:00:00Z") == "2024-05-01T10:00:00+00:00"
    assert normalise_date("2024-05-01 10:00") == "2024-05-01T10:00:00+00:00"  # naive: UTC
    assert normalise_date("2024-13-01") == "2024-13-01"  # not a date: text
    assert normalise_date("v1.2") == "v1.2"
    # the filter's dates are normalised; a column's value is taken as written
    assert parse({"d": {"$gte": "2024-05-01T12:00:00+02:00"}}) == Cond(
        parse({"d": 1}).field,
        "gte",
        "2024-05-01T10:00:00+00:00",  # type: ignore[union-attr]
    )
    created = parse({"created_at": "2024-05-01T12:00:00Z"})
    assert isinstance(created, Cond) and created.value == "2024-05-01T12:00:00Z"


def test_evaluate_is_type_strict_and_not_is_the_complement() -> None:
    meta = {"v": "3", "n": 3, "flag": True, "none": None, "tags": ["a"]}
    row = {"page": None, "chapter": "c"}

    def ok(f: dict[str, Any]) -> bool:
        return evaluate(parse(f), row, meta)

    assert ok({"n": 3}) and not ok({"v": 3}) and ok({"v": "3"})
    assert not ok({"flag": 1}) and ok({"flag": True})
    assert ok({"n": {"$ne": 4}}) and not ok({"missing": {"$ne": 4}})
    assert ok({"$not": {"missing": 4}})
    assert not ok({"none": {"$exists": True}}) and ok({"none": {"$exists": False}})
    assert not ok({"tags": "a"})  # a list never matches a scalar test
    assert not ok({"page": {"$ne": 2}}) and ok({"page": {"$exists": False}})
    assert ok({"v": {"$nin": [3]}}) and not ok({"missing": {"$nin": [3]}})
    assert ok({"$or": [{"chapter": "x"}, {"n": {"$gt": 2.5}}]})
