"""Filter trees → SQL, run on a real LanceDB table against the reference evaluator:
the regular expressions over the metadata JSON find top-level keys only, however the
values before them nest, and compare as the reference does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.store.base import metadata_json
from ragline.store.filter_ast import evaluate, parse
from ragline.store.filter_sql import NESTING, compile_sql, key_prefix

KEYS = ["a", "b", "date", "v"]
scalars = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([0.5, 2.5, -1.25]),
    st.booleans(),
    st.sampled_from(["x", "y", "2024-01-01", "2024-06-30T10:00:00+00:00", 'q"uote', "é"]),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=2)
    ),
    max_leaves=6,
)
metadatas = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)
filter_values = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([0.5, 2.5]),
    st.booleans(),
    st.sampled_from(["x", "y", "2024-01-01", "2024-03-01T00:00:00Z"]),
)
ranged = st.one_of(st.integers(-5, 5), st.sampled_from(["x", "2024-01-01", "2024-03-01T00:00:00Z"]))


@st.composite
def leaves(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(KEYS))
    op = draw(st.sampled_from(["$eq", "$ne", "$in", "$nin", "$gt", "$lte", "$exists"]))
    if op in ("$in", "$nin"):
        value: Any = draw(st.lists(filter_values, max_size=3))
    elif op == "$exists":
        value = draw(st.booleans())
    elif op in ("$gt", "$lte"):
        value = draw(ranged)
    else:
        value = draw(filter_values)
    return {key: {op: value}}


filters = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"$not": x}, inner),
    ),
    max_leaves=4,
)


@pytest.fixture(scope="module")
def table_factory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = lancedb.connect(tmp_path_factory.mktemp("filters"))
    made = iter(range(10**6))

    def make(metas: list[dict[str, Any]]) -> Any:
        data = {
            "id": [str(i) for i in range(len(metas))],
            "page": [i if i % 3 else None for i in range(len(metas))],
            "metadata": [metadata_json(m) for m in metas],
        }
        return db.create_table(f"t{next(made)}", pa.table(data))

    return make


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(metas=st.lists(metadatas, min_size=1, max_size=6), f=filters)
def test_lance_sql_matches_the_reference(
    table_factory: Any, metas: list[dict[str, Any]], f: dict[str, Any]
) -> None:
    table = table_factory(metas)
    node = parse(f)
    rows = table.search().where(compile_sql(node, "datafusion")).to_arrow().column("id").to_pylist()
    expected = [
        str(i) for i, m in enumerate(metas) if evaluate(node, {}, json.loads(metadata_json(m)))
    ]
    assert sorted(rows, key=int) == expected, (f, metas)


def test_top_level_key_only_at_any_nesting(table_factory: Any) -> None:
    deep: Any = {"v": 1}
    for _ in range(NESTING - 1):  # NESTING levels of brackets in all
        deep = [deep]
    metas = [{"a": deep, "v": 2}, {"a": {"v": 1}}, {"b": [{"v": 1}], "v": 1}]
    table = table_factory(metas)
    got = table.search().where(compile_sql(parse({"v": 1}), "datafusion")).to_arrow()
    assert got.column("id").to_pylist() == ["2"]
    got = table.search().where(compile_sql(parse({"v": 2}), "datafusion")).to_arrow()
    assert got.column("id").to_pylist() == ["0"]


def test_keys_and_values_are_literals_in_the_pattern() -> None:
    assert key_prefix("a-b").endswith('"a-b": ')
    sql = compile_sql(parse({"k": "x' OR 1=1 --.*"}), "datafusion")
    assert "x'' OR 1=1 --\\.\\*" in sql  # quotes doubled, regex metacharacters escaped
    pg = compile_sql(parse({"k": {"$gte": "2024-01-01"}, "title": {"$lt": "b"}}), "postgres")
    assert "(metadata->>'k') COLLATE \"C\" >= '2024-01-01'" in pg
    assert "title COLLATE \"C\" < 'b'" in pg


def test_empty_lists(table_factory: Any, tmp_path: Path) -> None:
    table = table_factory([{"v": 1}, {}])
    assert (
        table.search()
        .where(compile_sql(parse({"v": {"$in": []}}), "datafusion"))
        .to_arrow()
        .num_rows
        == 0
    )
    assert (
        table.search()
        .where(compile_sql(parse({"v": {"$nin": []}}), "datafusion"))
        .to_arrow()
        .num_rows
        == 1
    )


@settings(max_examples=80, deadline=None)
@given(metas=st.lists(metadatas, min_size=1, max_size=6), f=filters)
def test_sqlite_sql_matches_the_reference(metas: list[dict[str, Any]], f: dict[str, Any]) -> None:
    """The dialect of Chroma's term index (SQLite's JSON1) against the reference."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE chunks (id TEXT, page INTEGER, metadata TEXT)")
    db.executemany(
        "INSERT INTO chunks VALUES (?, ?, ?)",
        [(str(i), None, metadata_json(m)) for i, m in enumerate(metas)],
    )
    node = parse(f)
    sql = f"SELECT id FROM chunks WHERE {compile_sql(node, 'sqlite')} ORDER BY CAST(id AS INTEGER)"
    rows = [r[0] for r in db.execute(sql)]
    expected = [
        str(i) for i, m in enumerate(metas) if evaluate(node, {}, json.loads(metadata_json(m)))
    ]
    assert rows == expected, (f, metas)
