"""Held chunk columns (store/held_columns.py): what goes in comes back, per row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ragline.store.held_columns import HeldColumns, HeldColumnsBuilder, StringsAt, plain

SCHEMA = pa.schema(
    [
        pa.field("title", pa.string()),
        pa.field("heading_path", pa.list_(pa.string())),
        pa.field("page", pa.int32()),
        pa.field("start_char", pa.int64()),
        pa.field("has_code", pa.bool_()),
        pa.field("other", pa.string()),  # in the batches, not held
    ]
)
HELD = pa.schema([SCHEMA.field(n) for n in SCHEMA.names[:-1]])


def batch(rng: np.random.Generator, n: int, nulls: bool) -> pa.Table:
    titles = ["Notes", "Calculus", "", None] if nulls else ["Notes", "Calculus", ""]
    paths = [["A"], ["A", "B"], [], None] if nulls else [["A"], ["A", "B"], []]
    return pa.table(
        {
            "title": [titles[i] for i in rng.integers(0, len(titles), n)],
            "heading_path": [paths[i] for i in rng.integers(0, len(paths), n)],
            "page": [None if nulls and i % 3 == 0 else int(i) for i in rng.integers(0, 9, n)],
            "start_char": rng.integers(0, 2**40, n).tolist(),
            "has_code": (rng.random(n) < 0.5).tolist(),
            "other": ["x"] * n,
        },
        schema=SCHEMA,
    )


def taken(held: HeldColumns, positions: list[int]) -> pa.Table:
    at = np.asarray(positions, dtype=np.int64)
    return pa.table({n: held.take(n, at) for n in held.names}, schema=HELD)


def test_rows_come_back_as_written_with_nulls_in_any_batch() -> None:
    rng = np.random.default_rng(1)
    batches = [batch(rng, 7, False), batch(rng, 9, True), batch(rng, 5, False)]
    builder = HeldColumnsBuilder(HELD, 21)
    for b in batches:
        builder.add(b)
    held = builder.done()
    want = pa.concat_tables(batches).select(HELD.names)
    order = rng.permutation(21).tolist()
    assert taken(held, order).to_pylist() == want.take(order).to_pylist()
    assert held.names == tuple(HELD.names)
    # strings and lists are codes into the distinct values: 4 bytes a row
    assert held.columns["title"].data.dtype == np.int32
    assert len(held.columns["heading_path"].values) == 3


def test_kept_rows_and_new_rows_read_like_a_fresh_build() -> None:
    rng = np.random.default_rng(2)
    first, second = batch(rng, 12, True), batch(rng, 6, True)
    builder = HeldColumnsBuilder(HELD, 12)
    builder.add(first)
    old = builder.done()
    keep = np.asarray([0, 3, 4, 10], dtype=np.int64)
    builder = HeldColumnsBuilder(HELD, len(keep) + 6)
    builder.add_kept(old, keep)
    builder.add(second)
    held = builder.done()
    want = pa.concat_tables([first.take(keep), second]).select(HELD.names)
    assert taken(held, list(range(10))).to_pylist() == want.to_pylist()
    assert taken(old, list(range(12))).to_pylist() == first.select(HELD.names).to_pylist()


def test_values_no_row_uses_are_dropped_at_each_build() -> None:
    """A re-ingest replaces rows; their old distinct values must not stay for the
    life of the server (each refresh copies the tables of the one before)."""
    old_titles = pa.table({"title": [f"old {i}" for i in range(50)] + ["kept"]})
    builder = HeldColumnsBuilder(pa.schema([HELD.field("title")]), 51)
    builder.add(old_titles)
    old = builder.done()
    builder = HeldColumnsBuilder(pa.schema([HELD.field("title")]), 3)
    builder.add_kept(old, np.asarray([50], dtype=np.int64))
    builder.add(pa.table({"title": ["new", None]}))
    held = builder.done()
    assert sorted(held.columns["title"].values) == ["kept", "new"]
    assert held.take("title", np.arange(3)).to_pylist() == ["kept", "new", None]
    assert old.take("title", np.asarray([0, 50])).to_pylist() == ["old 0", "kept"]


def test_keeping_rows_of_other_columns_is_refused() -> None:
    builder = HeldColumnsBuilder(HELD, 3)
    builder.add(batch(np.random.default_rng(3), 3, False))
    other = HeldColumnsBuilder(pa.schema([HELD.field("title")]), 3)
    with pytest.raises(ValueError, match="same columns"):
        other.add_kept(builder.done(), np.arange(3))


def test_python_values_are_what_arrow_gives_for_every_column() -> None:
    """``values_at`` (a hit's values without an Arrow array) equals ``take`` then
    ``to_pylist``, value and type, with nulls in every kind of column, repeats and
    any order; no positions give no values."""
    rng = np.random.default_rng(11)
    builder = HeldColumnsBuilder(HELD, 60)
    builder.add(batch(rng, 30, nulls=False))
    builder.add(batch(rng, 30, nulls=True))
    held = builder.done()
    at = np.concatenate([rng.permutation(60), [31, 31, 0]]).astype(np.int64)
    for name in held.names:
        got, want = held.values_at(name, at), held.take(name, at).to_pylist()
        assert got == want and [type(v) for v in got] == [type(v) for v in want], name
        assert held.values_at(name, np.zeros(0, np.int64)) == []
    for name in ("title", "heading_path", "page"):
        assert None in held.values_at(name, at), name


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_strings_read_from_their_buffers_are_arrows_values(kind: pa.DataType) -> None:
    """Nulls, empty and non-ASCII strings, a sliced array and several chunks; a
    column that is not text is refused."""
    values = ["Größe", "", None, "日本語のテキスト", "x" * 300, None, "end"]
    whole = pa.array(values, kind)
    at = np.asarray([6, 0, 2, 3, 3, 1, 4, 5], dtype=np.int64)
    for column in (whole, pa.chunked_array([whole[:3], whole[3:]], kind)):
        assert StringsAt.of(column).values_at(at) == whole.take(at).to_pylist()
    sliced = whole[2:6]
    assert StringsAt.of(sliced).values_at(np.arange(4)) == values[2:6]
    assert StringsAt.of(pa.array([], kind)).values_at(np.zeros(0, np.int64)) == []
    with pytest.raises(TypeError, match="not a string column"):
        StringsAt.of(pa.array([1, 2]))


def _encoded(table: pa.Table) -> pa.Table:
    """``table`` as the search cache stores it: strings dictionary-encoded."""
    import pyarrow.compute as pc

    for at, f in enumerate(table.schema):
        if pa.types.is_string(f.type):
            table = table.set_column(at, f.name, pc.dictionary_encode(table.column(at)))
    return table


def test_the_search_caches_encoded_rows_hold_like_plain_ones() -> None:
    """Dictionary-encoded strings and numbers read from their buffers (the search
    cache's path, without pyarrow.compute) give the held columns that plain rows
    give, with nulls in every kind of column, sliced batches (an offset into the
    buffers) and batches of several chunks."""
    rng = np.random.default_rng(5)
    whole = pa.concat_tables([batch(rng, 40, True), batch(rng, 25, False), batch(rng, 40, True)])
    cuts = [whole.slice(0, 13), whole.slice(13, 50), whole.slice(63, 42)]
    plain_rows = HeldColumnsBuilder(HELD, 105)
    schema = _encoded(whole).schema
    assert pa.types.is_dictionary(schema.field("title").type)
    encoded_rows = HeldColumnsBuilder(pa.schema([plain(schema.field(n)) for n in HELD.names]), 105)
    assert encoded_rows.schema == HELD
    for cut in cuts:
        plain_rows.add(cut)
        encoded_rows.add(_encoded(cut))
    a, b = plain_rows.done(), encoded_rows.done()
    order = rng.permutation(105).tolist()
    assert taken(a, order).to_pylist() == whole.take(order).select(HELD.names).to_pylist()
    for name in HELD.names:
        assert a.values_at(name, np.asarray(order)) == b.values_at(name, np.asarray(order))
        assert (a.columns[name].valid is None) == (b.columns[name].valid is None), name
