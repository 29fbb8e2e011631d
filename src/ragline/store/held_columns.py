"""Chunk columns a large mirror snapshot keeps in memory, at a few bytes a row.

A hit's row needs every chunk column; reading them from LanceDB costs ≈ 0.55 ms per
column for 10 rows scattered over 1M (benchmarks/results/search_core.md, section 8),
so the mirror keeps the columns that are cheap to hold: numbers in numpy arrays,
strings and string lists as int32 codes into a table of distinct values (a
document's rows share its source, title, URL, …; a section's its headings). The
arrays are allocated once at their final size and filled batch by batch, as
:class:`~ragline.store.vector_index.VectorIndexBuilder` fills the vectors: no
concatenated copy, and nothing refers to the buffers of LanceDB's reads (a slice
of one can keep the whole read alive). Immutable once built.

Nothing here imports ``pyarrow.compute`` for the rows the search cache holds (its
strings come dictionary-encoded, nulls are read from the validity bitmaps): that
import is ≈ 0.1 CPU-s of a cold `ragline search` (issue 26). Rows read from LanceDB
are encoded with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

IntArray = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int32]

#: Code of a null value.
NULL = -1


def _coded(field: pa.Field) -> bool:
    """Whether a column is kept as codes into distinct values (else as numbers)."""
    return not (pa.types.is_integer(field.type) or pa.types.is_boolean(field.type))


@dataclass(frozen=True, slots=True)
class Column:
    """One held column: ``data`` (numbers, or codes into ``values``) and, for numbers
    that were ever null, ``valid``."""

    field: pa.Field
    data: npt.NDArray[Any]
    values: tuple[Any, ...] = ()
    valid: npt.NDArray[np.bool_] | None = None
    coded: bool = dataclass_field(init=False)  # of the field's type, asked once (≈ 1 µs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "coded", _coded(self.field))

    @property
    def nbytes(self) -> int:
        extra = 0 if self.valid is None else self.valid.nbytes
        return int(self.data.nbytes) + extra

    def take(self, positions: IntArray) -> pa.Array:
        """The values at ``positions`` as an Arrow array of the column's type."""
        if not self.coded:
            mask = None if self.valid is None else ~self.valid[positions]
            return pa.array(self.data[positions], type=self.field.type, mask=mask)
        return pa.array(self.values_at(positions), type=self.field.type)

    def values_at(self, positions: IntArray) -> list[Any]:
        """The values at ``positions`` as Python objects (None for a null), as Arrow's
        ``to_pylist`` gives them, without an Arrow array in between: a search turns a
        hit's columns into Python values anyway, and one Arrow call per column costs
        more than the numpy gather (benchmarks/results/search_hits.md). A list value
        is the held object itself: a caller copies it before changing it."""
        picked = self.data[positions].tolist()
        if self.coded:
            values = self.values
            return [None if c == NULL else values[c] for c in picked]
        if self.valid is None:
            return picked  # type: ignore[no-any-return]
        valid = self.valid[positions].tolist()
        return [v if ok else None for v, ok in zip(picked, valid, strict=True)]


@dataclass(frozen=True, slots=True)
class HeldColumns:
    """Columns of a snapshot's rows (row i = position i)."""

    columns: dict[str, Column]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([c.field for c in self.columns.values()])

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.columns.values())

    def take(self, name: str, positions: IntArray) -> pa.Array:
        return self.columns[name].take(positions)

    def values_at(self, name: str, positions: IntArray) -> list[Any]:
        return self.columns[name].values_at(positions)

    def equal_to(self, name: str, value: str) -> npt.NDArray[np.bool_] | None:
        """Rows whose string column ``name`` is ``value`` (SQL ``name = 'value'``: a
        null is never equal); None when the column is not held as strings."""
        column = self.columns.get(name)
        if column is None or not pa.types.is_string(column.field.type):
            return None
        try:
            code = column.values.index(value)
        except ValueError:
            return np.zeros(len(column.data), dtype=bool)
        found: npt.NDArray[np.bool_] = column.data == code
        return found


class HeldColumnsBuilder:
    """Fills :class:`HeldColumns` of ``rows`` rows: kept rows of an older snapshot,
    then new batches. Distinct values are only appended while filling, so kept codes
    stay valid; :meth:`done` then drops the values no row uses any more (re-ingested
    documents' old titles, timestamps, …), so a long-running server's tables do not
    grow with every refresh."""

    def __init__(self, schema: pa.Schema, rows: int) -> None:
        self.schema = schema
        self.rows = rows
        self.filled = 0
        self.data: dict[str, npt.NDArray[Any]] = {}
        self.valid: dict[str, npt.NDArray[np.bool_] | None] = {}
        self.values: dict[str, list[Any]] = {}
        self.lookup: dict[str, dict[Any, int]] = {}
        for f in schema:
            coded = _coded(f)
            dtype = np.int32 if coded else f.type.to_pandas_dtype()
            self.data[f.name] = np.empty(rows, dtype)
            self.valid[f.name] = None
            if coded:
                self.values[f.name] = []
                self.lookup[f.name] = {}

    def add_kept(self, old: HeldColumns, keep: IntArray) -> None:
        """The rows of ``old`` (same columns) at positions ``keep``."""
        if old.names != tuple(self.schema.names):
            raise ValueError("held columns can only keep rows of the same columns")
        a, b = self.filled, self.filled + len(keep)
        for name, col in old.columns.items():
            np.take(col.data, keep, out=self.data[name][a:b])
            if name in self.values:
                self.values[name] = list(col.values)
                self.lookup[name] = {_key(v): n for n, v in enumerate(col.values)}
            elif col.valid is not None:
                self._valid(name)[a:b] = col.valid[keep]
        self.filled = b

    def add(self, batch: pa.Table) -> None:
        """New rows (a table with at least the held columns)."""
        a, b = self.filled, self.filled + batch.num_rows
        for f in self.schema:
            column = batch.column(f.name)
            if f.name in self.values:
                self.data[f.name][a:b] = self._codes(f, column)
                continue
            at = a
            for chunk in column.chunks:
                end = at + len(chunk)
                valid = validity(chunk)
                values = self.data[f.name][at:end]
                values[:] = _numbers(chunk)
                if valid is not None:  # rows before the first null are valid already
                    values[~valid] = 0
                    self._valid(f.name)[at:end] = valid
                at = end
        self.filled = b

    def done(self) -> HeldColumns:
        n = self.filled
        columns = {}
        for f in self.schema:
            valid = self.valid[f.name]
            data, values = self.data[f.name][:n], self.values.get(f.name, [])
            if f.name in self.values:
                values = compact_codes(data, values)
            columns[f.name] = Column(f, data, tuple(values), None if valid is None else valid[:n])
        return HeldColumns(columns)

    def _valid(self, name: str) -> npt.NDArray[np.bool_]:
        """The column's validity array, created (all valid so far) on its first null."""
        valid = self.valid[name]
        if valid is None:
            valid = np.ones(self.rows, dtype=bool)
            self.valid[name] = valid
        return valid

    def _codes(self, field: pa.Field, column: pa.ChunkedArray) -> Codes:
        """Codes of a batch's values, adding the values not seen before."""
        values, lookup = self.values[field.name], self.lookup[field.name]
        if pa.types.is_dictionary(column.type):  # the search cache's strings
            distinct, local = _dictionary_positions(column)
        elif pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            import pyarrow.compute as pc  # rows read from LanceDB (it is loaded already)

            encoded = pc.dictionary_encode(column).combine_chunks()  # one dictionary
            distinct, local = _dictionary_positions(pa.chunked_array([encoded]))
        else:  # lists and other nested values: one Python object a row
            distinct = column.to_pylist()
            local = np.arange(len(distinct))
        lut = np.empty(len(distinct) + 1, np.int32)
        lut[NULL] = NULL
        for n, value in enumerate(distinct):
            if value is None:
                lut[n] = NULL
                continue
            key = _key(value)
            code = lookup.get(key)
            if code is None:
                code = lookup[key] = len(values)
                values.append(value)
            lut[n] = code
        out: Codes = lut[local]
        return out


def compact_codes(codes: Codes, values: list[Any]) -> list[Any]:
    """The ``values`` some code uses, in their order; ``codes`` are renumbered in
    place to match (O(rows): one count, one gather)."""
    live = codes[codes != NULL]
    used = np.flatnonzero(np.bincount(live, minlength=len(values)))
    if len(used) == len(values):
        return values
    renumber = np.full(len(values) + 1, NULL, np.int32)  # the last slot maps NULL (-1)
    renumber[used] = np.arange(len(used), dtype=np.int32)
    codes[:] = renumber[codes]
    return [values[i] for i in used.tolist()]


def plain(field: pa.Field) -> pa.Field:
    """``field`` with a dictionary type replaced by its value type (the search cache
    stores strings encoded; the held columns are of the table's own types)."""
    if pa.types.is_dictionary(field.type):
        return field.with_type(field.type.value_type)
    return field


def validity(array: pa.Array) -> npt.NDArray[np.bool_] | None:
    """Which rows of ``array`` hold a value, read from its validity bitmap; None when
    none is null."""
    bitmap = array.buffers()[0]
    if not array.null_count or bitmap is None:
        return None
    return _bits(bitmap, array.offset, len(array))


def _bits(buffer: pa.Buffer, at: int, n: int) -> npt.NDArray[np.bool_]:
    """Bits ``at`` to ``at + n`` of an Arrow bitmap (least significant bit first)."""
    bits = np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")
    return bits[at : at + n].astype(bool)


def _numbers(array: pa.Array) -> npt.NDArray[Any]:
    """An integer or boolean array's values, whatever its null slots hold."""
    data = array.buffers()[1]
    n, at = len(array), array.offset
    if data is None:  # all null
        return np.zeros(n, array.type.to_pandas_dtype())
    if pa.types.is_boolean(array.type):
        return _bits(data, at, n)
    return np.frombuffer(data, array.type.to_pandas_dtype())[at : at + n]


def _dictionary_positions(column: pa.ChunkedArray) -> tuple[list[Any], IntArray]:
    """A dictionary-encoded column's dictionary values (one chunk's after another)
    and each row's position among them, ``NULL`` for a null."""
    distinct: list[Any] = []
    local: list[IntArray] = []
    for chunk in column.chunks:
        indices = chunk.indices
        where = _numbers(indices).astype(np.int64) + len(distinct)
        valid = validity(indices)
        if valid is not None:
            where[~valid] = NULL
        local.append(where)
        distinct.extend(chunk.dictionary.to_pylist())
    return distinct, np.concatenate(local) if local else np.zeros(0, np.int64)


def _key(value: Any) -> Any:
    """A hashable stand-in for a value (lists become tuples)."""
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True, slots=True)
class StringsAt:
    """An Arrow string column read row by row from its own buffers (no copy): a
    hit's text decoded straight from its bytes. An Arrow take + ``to_pylist`` costs
    ≈ 1.3× this on warm caches and ≈ 2× on cold ones (another search's work in
    between; benchmarks/results/search_hits.md)."""

    offsets: npt.NDArray[np.int64] | npt.NDArray[np.int32]
    data: memoryview
    nulls: npt.NDArray[np.bool_] | None = None

    @classmethod
    def of(cls, column: pa.ChunkedArray | pa.Array) -> StringsAt:
        """The view of a ``string`` or ``large_string`` column; it keeps the buffers alive."""
        array = column
        if isinstance(column, pa.ChunkedArray):
            array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
        if pa.types.is_string(array.type):
            dtype: type[np.signedinteger[Any]] = np.int32
        elif pa.types.is_large_string(array.type):
            dtype = np.int64
        else:
            raise TypeError(f"not a string column: {array.type}")
        _, offsets, data = array.buffers()
        ends = np.frombuffer(offsets, dtype=dtype) if offsets is not None else np.zeros(1, dtype)
        ends = ends[array.offset : array.offset + len(array) + 1]
        valid = validity(array)
        nulls = None if valid is None else ~valid
        return cls(ends, memoryview(data) if data is not None else memoryview(b""), nulls)

    def values_at(self, positions: IntArray) -> list[str | None]:
        """The strings at ``positions`` (None for a null), as Arrow's ``to_pylist``."""
        data = self.data
        starts = self.offsets[positions].tolist()
        ends = self.offsets[positions + 1].tolist()
        out: list[str | None] = [str(data[a:b], "utf-8") for a, b in zip(starts, ends, strict=True)]
        if self.nulls is not None:
            null = self.nulls[positions].tolist()
            out = [None if n else v for v, n in zip(out, null, strict=True)]
        return out
