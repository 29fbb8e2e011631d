"""Filters → SQL: escaping, validation, and that LanceDB reads the SQL as meant."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.store.filters import (
    CHUNK_FILTER_FIELDS,
    DOCUMENT_FILTER_FIELDS,
    and_predicates,
    sql_in_list,
    sql_literal,
    to_sql_predicate,
)

INJECTIONS = [
    "x' OR '1'='1",
    "x'; DROP TABLE chunks; --",
    "' OR tenant IS NOT NULL OR '",
    "a\\' OR 1=1 --",
    "\\",
    "'",
    "''",
    'double "quoted"',
    "ümlaut ✓ 漢字",
    "line\nbreak",
    "",
]


def test_empty_filters_give_empty_predicate() -> None:
    assert to_sql_predicate(None) == ""
    assert to_sql_predicate({}) == ""


def test_literals_by_type() -> None:
    assert sql_literal("acme") == "'acme'"
    assert sql_literal("O'Brien") == "'O''Brien'"
    assert sql_literal(True) == "true"
    assert sql_literal(False) == "false"
    assert sql_literal(7) == "7"
    assert sql_literal(-3) == "-3"
    assert sql_literal(0.25) == "0.25"


def test_predicate_is_sorted_and_joined_with_and() -> None:
    pred = to_sql_predicate({"tenant": "acme", "has_code": True, "chunk_index": 3})
    assert pred == "chunk_index = 3 AND has_code = true AND tenant = 'acme'"


def test_injection_is_escaped_into_one_literal() -> None:
    pred = to_sql_predicate({"tenant": "x' OR '1'='1"})
    assert pred == "tenant = 'x'' OR ''1''=''1'"


def test_unknown_field_is_named() -> None:
    with pytest.raises(ValueError, match="unknown filter field 'colour'"):
        to_sql_predicate({"colour": "red"})


@pytest.mark.parametrize("name", ["tenant; DROP", "Tenant", "1abc", "a b", "tenant--", ""])
def test_bad_identifier_is_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="not a valid column name"):
        to_sql_predicate({name: "x"})


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"has_code": "yes"}, "has_code"),
        ({"has_code": 1}, "has_code"),
        ({"chunk_index": True}, "chunk_index"),
        ({"chunk_index": "3"}, "chunk_index"),
        ({"page": 1.5}, "page"),
        ({"tenant": 3}, "tenant"),
    ],
)
def test_wrong_value_type_names_the_field(filters: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=f"filter field '{field}' expects"):
        to_sql_predicate(filters)  # type: ignore[arg-type]


def test_non_finite_float_and_nul_are_rejected() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        sql_literal(float("nan"))
    with pytest.raises(ValueError, match="not a finite number"):
        sql_literal(float("inf"))
    with pytest.raises(ValueError, match="NUL"):
        sql_literal("a\x00b")
    with pytest.raises(ValueError, match="not valid Unicode"):
        sql_literal("broken \ud800 surrogate")


def test_other_field_sets() -> None:
    assert to_sql_predicate({"format": "pdf"}, DOCUMENT_FILTER_FIELDS) == "format = 'pdf'"
    with pytest.raises(ValueError, match="unknown filter field 'has_code'"):
        to_sql_predicate({"has_code": True}, DOCUMENT_FILTER_FIELDS)
    assert to_sql_predicate({"score": 2}, {"score": float}) == "score = 2"


def test_in_list_and_and_predicates() -> None:
    assert sql_in_list("id", ["a", "b'c"]) == "id IN ('a', 'b''c')"
    assert sql_in_list("chunk_index", []) == "false"
    with pytest.raises(ValueError, match="not a valid column name"):
        sql_in_list("id) OR (1=1", ["a"])
    assert and_predicates("a = 1", "", "b = 2") == "(a = 1) AND (b = 2)"
    assert and_predicates("", "a = 1") == "a = 1"
    assert and_predicates() == ""


def test_every_chunk_field_is_filterable_in_lancedb(tmp_path: Path) -> None:
    """Each allowed column name and literal type parses in LanceDB's SQL."""
    types = {str: pa.string(), int: pa.int64(), bool: pa.bool_()}
    samples: dict[type, str | int | bool] = {str: "v", int: 1, bool: True}
    schema = pa.schema([(name, types[t]) for name, t in CHUNK_FILTER_FIELDS.items()])
    row = {name: samples[t] for name, t in CHUNK_FILTER_FIELDS.items()}
    table = lancedb.connect(tmp_path).create_table("t", pa.Table.from_pylist([row], schema=schema))
    for name, t in CHUNK_FILTER_FIELDS.items():
        assert table.count_rows(to_sql_predicate({name: samples[t]})) == 1, name
    assert table.count_rows(to_sql_predicate(row)) == 1


@pytest.fixture(scope="module")
def tenants_table(tmp_path_factory: pytest.TempPathFactory) -> lancedb.table.Table:
    values = ["acme", "x", "1", *INJECTIONS]
    data = pa.table({"tenant": values, "n": list(range(len(values)))})
    return lancedb.connect(tmp_path_factory.mktemp("filters")).create_table("t", data)


@pytest.mark.parametrize("value", INJECTIONS)
def test_injection_matches_only_its_own_row(tenants_table: lancedb.table.Table, value: str) -> None:
    pred = to_sql_predicate({"tenant": value})
    rows = tenants_table.search().where(pred).select(["tenant"]).to_arrow()
    assert rows.column("tenant").to_pylist() == [value]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=30))
def test_any_text_is_one_literal(tenants_table: lancedb.table.Table, value: str) -> None:
    """Whatever the text, the predicate is a single equality test: it parses and
    matches exactly the rows whose tenant equals it (none here, unless listed)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        with pytest.raises(ValueError, match="not valid Unicode"):
            to_sql_predicate({"tenant": value})
        return
    expected = 1 if value in {"acme", "x", "1", *INJECTIONS} else 0
    assert tenants_table.count_rows(to_sql_predicate({"tenant": value})) == expected


def test_integer_values_outside_the_column_range_are_refused() -> None:
    """page/chunk_index/… are 32-bit columns, start_char/end_char 64-bit: a value
    outside is refused here, naming the field, instead of by the engine (whose
    message carries the SQL)."""
    predicate = to_sql_predicate
    assert predicate({"page": 2**31 - 1}) == f"page = {2**31 - 1}"
    assert predicate({"start_char": 2**40}) == f"start_char = {2**40}"
    for field, value in (("page", 2**31), ("page", 2**63), ("chunk_index", -(2**31) - 1),
                         ("start_char", 2**63), ("end_char", -(2**63) - 1)):  # fmt: skip
        with pytest.raises(ValueError, match=f"'{field}'.*range"):
            predicate({field: value})
