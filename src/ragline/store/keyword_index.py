"""BM25 from in-memory postings: :mod:`ragline.store.bm25`'s scores, from sparse matrices.

One ``docs × terms`` CSC matrix of term frequencies per BM25 field (title,
headings, text), built with ragline's own analyser (:func:`bm25.chunk_terms`),
so a language-aware analyser there applies here unchanged. Statistics (N, df,
avgdl) are taken over the rows the index holds when a query runs, so a score is
exactly what the exhaustive scorer (:func:`bm25.field_score` +
:func:`bm25.combine_fields`) gives for the same rows, up to float64 rounding.

A query touches only the postings of its own terms (one column slice per term
and field): the cost grows with the matching postings, not the corpus. The index
is immutable; :meth:`KeywordIndex.appended` and :meth:`KeywordIndex.kept` return
new ones, so a reader holding one is never disturbed by a refresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from ragline.store.bm25 import K1, KEYWORD_FIELDS, B, FieldTerms

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _field_norms(lengths: FloatArray, k1: float, b: float) -> tuple[int, FloatArray]:
    """(N, per-row ``k1·(1 − b + b·dl/avgdl)``) over rows whose field has tokens."""
    n = int(np.count_nonzero(lengths))
    avgdl = float(lengths.sum()) / n if n else 0.0
    if avgdl > 0:
        return n, k1 * (1.0 - b + b * lengths / avgdl)
    return n, np.full(lengths.shape, k1 * (1.0 - b))


def compact(values: Sequence[int]) -> npt.NDArray[np.uint16] | npt.NDArray[np.float32]:
    """Term counts (or in-batch row numbers) as uint16 when they fit, else float32."""
    a = np.asarray(values, dtype=np.int64)
    return a.astype(np.uint16) if not len(a) or int(a.max()) <= 0xFFFF else a.astype(np.float32)


def stacked_csc(
    old: sp.csc_array,
    starts: list[int],
    rows: list[npt.NDArray[np.generic]],
    cols: list[npt.NDArray[np.int32]],
    vals: list[npt.NDArray[np.generic]],
    added: int,
    width: int,
) -> sp.csc_array:
    """``old``'s rows, then ``added`` new ones given as per-batch postings: batch j's
    rows are numbered from 0 (ascending) and start at new row ``starts[j]``; the
    result is one ``width``-column CSC matrix (term counts uint16 when they fit).

    A counting sort writes every posting once into the final arrays, and each batch's
    lists are dropped as soon as they are placed: peak memory is the compact lists
    plus the result, where COO → CSC and ``vstack`` held several copies (1M chunks:
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
    return sp.csc_array((data, indices, indptr), shape=(offset + added, width))


class KeywordIndex:
    """Term frequencies and field lengths of a set of rows (row i = the i-th chunk)."""

    __slots__ = ("_n", "_norms", "b", "k1", "lengths", "tf", "vocab")

    def __init__(
        self,
        vocab: Mapping[str, int],
        tf: Sequence[sp.csc_array],
        lengths: Sequence[FloatArray],
        k1: float = K1,
        b: float = B,
    ) -> None:
        self.vocab = vocab
        self.tf = tuple(tf)
        self.lengths = tuple(lengths)
        self.k1, self.b = k1, b
        stats = [_field_norms(dl, k1, b) for dl in self.lengths]
        self._n = tuple(n for n, _ in stats)
        self._norms = tuple(norm for _, norm in stats)

    @classmethod
    def empty(cls, k1: float = K1, b: float = B) -> KeywordIndex:
        fields = len(KEYWORD_FIELDS)
        return cls(
            {},
            [sp.csc_array((0, 0), dtype=np.uint16) for _ in range(fields)],
            [np.zeros(0) for _ in range(fields)],
            k1,
            b,
        )

    @property
    def rows(self) -> int:
        return int(self.lengths[0].shape[0])

    def appended(self, terms: Sequence[Mapping[str, FieldTerms]]) -> KeywordIndex:
        """This index plus one row per item of ``terms`` (:func:`bm25.chunk_terms` output)."""
        return self.appended_batches([terms])

    def appended_batches(
        self, batches: Iterable[Sequence[Mapping[str, FieldTerms]]]
    ) -> KeywordIndex:
        """:meth:`appended` for rows that arrive in batches: each batch's postings become
        numpy arrays at once, so memory holds one batch of Python objects at a time."""
        vocab = dict(self.vocab)
        fields = len(KEYWORD_FIELDS)
        starts: list[int] = []
        rows_at = [[] for _ in range(fields)]  # type: list[list[npt.NDArray[np.generic]]]
        cols_at = [[] for _ in range(fields)]  # type: list[list[npt.NDArray[np.int32]]]
        vals_at = [[] for _ in range(fields)]  # type: list[list[npt.NDArray[np.generic]]]
        lengths: list[list[FloatArray]] = [[dl] for dl in self.lengths]
        added = 0
        for terms in batches:
            for f, name in enumerate(KEYWORD_FIELDS):
                rows: list[int] = []
                cols: list[int] = []
                vals: list[int] = []
                dl = np.empty(len(terms))
                for i, item in enumerate(terms):
                    field = item[name]
                    dl[i] = field.length
                    for term, count in field.tf.items():
                        col = vocab.get(term)
                        if col is None:
                            col = vocab[term] = len(vocab)
                        rows.append(i)
                        cols.append(col)
                        vals.append(count)
                rows_at[f].append(compact(rows))
                cols_at[f].append(np.asarray(cols, np.int32))
                vals_at[f].append(compact(vals))
                lengths[f].append(dl)
            starts.append(added)
            added += len(terms)
        if not added:
            return self
        width = len(vocab)
        matrices = [
            stacked_csc(old, list(starts), rows_at[f], cols_at[f], vals_at[f], added, width)
            for f, old in enumerate(self.tf)
        ]
        return KeywordIndex(
            vocab, matrices, [np.concatenate(dl) for dl in lengths], self.k1, self.b
        )

    def kept(self, keep: IntArray) -> KeywordIndex:
        """Only the rows at positions ``keep`` (ascending), renumbered 0..len(keep)-1."""
        if len(keep) == self.rows:
            return self
        return KeywordIndex(
            self.vocab,
            [sp.csc_array(m[keep]) for m in self.tf],
            [dl[keep] for dl in self.lengths],
            self.k1,
            self.b,
        )

    def scores(self, query: Mapping[str, int], boosts: Sequence[float]) -> FloatArray:
        """Each row's BM25 score for the query's term counts: the best boosted field
        (0 where no field matches). ``boosts`` follow :data:`bm25.KEYWORD_FIELDS`."""
        best: FloatArray | None = None
        cols = [(self.vocab[t], c) for t, c in query.items() if t in self.vocab]
        for f, boost in enumerate(boosts):
            if boost <= 0 or not cols:
                continue
            m, n, norm = self.tf[f], self._n[f], self._norms[f]
            acc: FloatArray | None = None
            for col, count in cols:
                lo, hi = int(m.indptr[col]), int(m.indptr[col + 1])
                if lo == hi:
                    continue
                rows = m.indices[lo:hi]
                tf = m.data[lo:hi]
                df = hi - lo
                idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
                # tf / (tf + norm) · count · idf · (k1 + 1), in one temporary (the
                # postings of a common term at 1M rows are most of a search's time)
                part = norm[rows]
                part += tf
                np.divide(tf, part, out=part)
                part *= count * idf * (self.k1 + 1.0)
                if acc is None:
                    acc = np.zeros(self.rows)
                acc[rows] += part
            if acc is None:
                continue
            if boost != 1.0:
                acc *= boost
            if best is None:
                best = acc
            else:
                np.maximum(best, acc, out=best)
        return np.zeros(self.rows) if best is None else best
