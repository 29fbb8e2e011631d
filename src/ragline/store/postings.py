"""Term-frequency postings: a ``docs × terms`` CSC matrix held as three numpy arrays.

:mod:`ragline.store.keyword_index` used ``scipy.sparse.csc_array`` for this, as a
container and for one row selection. Importing scipy.sparse costs ≈ 0.13 s (its
array-API layer imports numpy's f2py, ma and testing), paid by every process that
searches, a cold ``ragline search`` included (issue 26). What the index needs is
small: column slices (``indptr``), an append (:func:`stacked_csc`) and a row
selection (:meth:`Postings.rows_at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Postings:
    """Column ``j`` (a term) holds the postings ``indptr[j]:indptr[j + 1]``: their rows
    in ``indices`` (ascending within a column) and term counts in ``data``."""

    data: npt.NDArray[Any]
    indices: npt.NDArray[Any]  # int32, or int64 past 2**31 postings or rows
    indptr: npt.NDArray[Any]
    shape: tuple[int, int]

    @classmethod
    def empty(cls) -> Postings:
        """No rows and no columns (counts uint16, as :func:`compact` makes them)."""
        return cls(np.zeros(0, np.uint16), np.zeros(0, np.int32), np.zeros(1, np.int32), (0, 0))

    @property
    def nnz(self) -> int:
        """How many postings."""
        return int(self.data.shape[0])

    def rows_at(self, keep: IntArray) -> Postings:
        """Only the rows at positions ``keep`` (ascending), renumbered 0..len(keep)-1;
        rows stay ascending within each column."""
        renumbered = np.full(self.shape[0], -1, np.int64)
        renumbered[keep] = np.arange(len(keep))
        rows = renumbered[self.indices]
        kept = rows >= 0
        before = np.zeros(self.nnz + 1, np.int64)  # postings kept before each one
        np.cumsum(kept, out=before[1:])
        indptr = before[self.indptr].astype(self.indptr.dtype)
        return Postings(
            self.data[kept],
            rows[kept].astype(self.indices.dtype),
            indptr,
            (len(keep), self.shape[1]),
        )

    def dense(self) -> npt.NDArray[Any]:
        """The matrix as a dense array (for checks on small ones)."""
        out = np.zeros(self.shape, self.data.dtype)
        cols = np.repeat(np.arange(self.shape[1]), np.diff(self.indptr))
        out[self.indices, cols] = self.data
        return out


def stacked_csc(
    old: Postings,
    starts: list[int],
    rows: list[npt.NDArray[np.generic]],
    cols: list[npt.NDArray[np.int32]],
    vals: list[npt.NDArray[np.generic]],
    added: int,
    width: int,
) -> Postings:
    """``old``'s rows, then ``added`` new ones given as per-batch postings: batch j's
    rows are numbered from 0 (ascending) and start at new row ``starts[j]``; the
    result is one ``width``-column CSC matrix (term counts uint16 when they fit).

    A counting sort writes every posting once into the final arrays, and each batch's
    lists are dropped as soon as they are placed: peak memory is the compact lists
    plus the result, where COO → CSC and scipy's ``vstack`` held several copies (1M chunks:
    3.4 GiB peak RSS before, see benchmarks/results/search_core.md, section 5)."""
    old_counts = np.zeros(width, np.int64)
    old_counts[: old.shape[1]] = np.diff(old.indptr)
    counts = old_counts.copy()
    for c in cols:
        counts += np.bincount(c, minlength=width)
    nnz = int(counts.sum())
    index = np.int32 if max(nnz, old.shape[0] + added) < 2**31 else np.int64
    indptr = np.zeros(width + 1, index)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(nnz, index)
    data = np.empty(nnz, np.result_type(old.data.dtype, *(v.dtype for v in vals)))
    fill = indptr[:-1].astype(np.int64)
    if old.nnz:  # old postings first in each column, in their order
        col_of = np.repeat(np.arange(width), old_counts)
        dest = (
            fill[col_of]
            + np.arange(old.nnz)
            - np.repeat(old.indptr[:-1], old_counts[: old.shape[1]])
        )
        indices[dest] = old.indices
        data[dest] = old.data
        fill += old_counts
    offset = old.shape[0]
    for batches in (starts, rows, cols, vals):
        batches.reverse()  # pop() takes the batches in order
    while cols:
        start, c, r, v = starts.pop(), cols.pop(), rows.pop(), vals.pop()
        order = np.argsort(c, kind="stable")  # rows stay ascending within a column
        c = c[order]
        per_col = np.bincount(c, minlength=width)
        dest = fill[c] + np.arange(len(c)) - (np.cumsum(per_col) - per_col)[c]
        indices[dest] = r[order].astype(index) + (offset + start)
        data[dest] = v[order]
        fill += per_col
    return Postings(data, indices, indptr, (offset + added, width))
