"""The numpy BM25 scorer's arithmetic: :func:`~.bm25_sql.keyword_sql`'s formula
over packed postings, bit for bit, in pure functions (no I/O).

The cost of the SQL scorers is the executor's per-row work (expressions, hash
aggregation: ~1 µs a posting), not reading the postings. So the default scorer
(:mod:`.bm25_packed`) reads the postings packed (:data:`POSTING`) and numpy
computes the SQL's arithmetic in the same float64 operations and order
(:class:`Formula`), so the scores are equal, not close. Each term's postings
come in parts (:class:`Part`) with per-field bounds, which MaxScore prunes by.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from ragline.store.postgres.bm25_query import SLACK

#: One posting as packed (PostgreSQL's binary send format of each column).
POSTING = np.dtype([("key", ">i8"), ("tf", ">i4", (3,)), ("len", ">i4", (3,))])
_NATIVE = np.dtype([("key", "i8"), ("tf", "i4", (3,)), ("len", "i4", (3,))])


class Formula:
    """:func:`~.bm25_sql.keyword_sql`'s arithmetic reproduced bit for bit in float64.

    The SQL mixes numeric literals with float8 columns, so some steps are exact
    decimals rounded once to float8: ``boost·qtf·(k1+1)``, ``tf + k1(1−b)`` and
    ``k1·b·len``. Those are computed with :class:`~decimal.Decimal` (tables per
    integer ``tf``/``len``, grown on demand); everything else is the same
    float8 operations in the same order, and ``ln`` is the C library's ``log``
    in both. Equal inputs therefore give equal scores, not just close ones.
    """

    def __init__(self, k1: float, b: float) -> None:
        self.coef = Decimal(repr(k1 + 1.0))
        self.a1 = Decimal(repr(k1 * (1 - b)))
        self.a2 = Decimal(repr(k1 * b))
        self._t1 = np.zeros(0)
        self._t2 = np.zeros(0)

    def weight(self, boost: float, qtf: int, n: float, df: int) -> float:
        """``s.w_f`` of the SQL (``bm25_sql._head``): boost·qtf·(k1+1)·idf."""
        w = float(Decimal(repr(boost)) * qtf * self.coef)
        return w * math.log(1 + ((n - df) + 0.5) / (df + 0.5))

    def tables(self, max_tf: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """``tf + k1(1−b)`` and ``k1·b·len`` as float8, indexed by the integer."""
        t1, t2 = self._t1, self._t2  # locals: another thread may swap the tables
        if len(t1) <= max_tf:
            t1 = self._t1 = np.array([float(t + self.a1) for t in range(2 * max_tf + 16)])
        if len(t2) <= max_len:
            t2 = self._t2 = np.array([float(self.a2 * n) for n in range(2 * max_len + 64)])
        return t1, t2

    def bound(
        self,
        weights: tuple[float, float, float],
        max_tf: Sequence[int],
        min_len: Sequence[int],
        avg: tuple[float, float, float],
    ) -> np.ndarray:
        """Per field, the most a posting with tf ≤ ``max_tf`` and length ≥ ``min_len``
        adds to a chunk's score: ``w·tf/(tf + k1(1−b) + k1·b·len/avg)`` grows with
        tf and falls with len. Raised by a relative slack, so float rounding of
        the exact sums never exceeds it."""
        out = np.zeros(3)
        for f in range(3):
            tf, ln = int(max_tf[f]), int(min_len[f])
            if tf > 0:
                sat = tf / (tf + float(self.a1) + float(self.a2) * ln / avg[f])
                out[f] = weights[f] * sat * (1.0 + 4 * SLACK)
        return out


@dataclass(frozen=True)
class Part:
    """Some postings of one query term, and per field the most each adds to a score."""

    term: int  # index of the term in query-term order
    postings: np.ndarray  # POSTING records, one chunk at most once
    weights: tuple[float, float, float]  # the term's per-field weight (Formula.weight)
    bound: np.ndarray  # (3,) float

    @property
    def top(self) -> float:
        return float(self.bound.max(initial=0.0))


def _positions(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (ascending) and each key's index among them: through a
    dense map when the keys are not much sparser than their count (no sort)."""
    top = int(keys.max(initial=0)) + 1
    if top <= 16 * len(keys):
        seen = np.zeros(top, dtype=bool)
        seen[keys] = True
        present = np.flatnonzero(seen)
        index = np.empty(top, dtype=np.int64)  # only the entries written are read
        index[present] = np.arange(len(present))
        return present, index[keys]
    present, pos = np.unique(keys, return_inverse=True)
    return present, pos


def field_sums(
    parts: Sequence[Part], avg: tuple[float, float, float], formula: Formula
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct chunk keys (ascending) and their per-field sums ``(3, n)``, from
    parts in the order to sum them (a chunk at most once per part).

    Contributions are computed for all postings at once per field (zero-tf
    postings skipped: adding 0 changes no sum), then added part by part, so
    each chunk's sums run in part order.
    """
    if not parts:
        return np.zeros(0, np.int64), np.zeros((3, 0))
    sizes = [len(part.postings) for part in parts]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    postings = np.concatenate([part.postings for part in parts]).astype(_NATIVE)
    present, pos = _positions(postings["key"])
    tf, length = postings["tf"], postings["len"]
    t1, t2 = formula.tables(int(tf.max(initial=0)), int(length.max(initial=0)))
    w = np.asarray([part.weights for part in parts], dtype=np.float64).reshape(len(parts), 3)
    acc = np.zeros((3, len(present)))
    for f in range(3):
        nz = np.flatnonzero(tf[:, f] > 0)
        if not len(nz):
            continue
        t = tf[nz, f]
        wf = np.repeat(w[:, f], sizes)[nz]
        c = (wf * t) / (t1[t] + t2[length[nz, f]] / avg[f])
        cut = np.searchsorted(nz, bounds)
        p, row = pos[nz], acc[f]
        for i in range(len(parts)):
            if cut[i] < cut[i + 1]:
                row[p[cut[i] : cut[i + 1]]] += c[cut[i] : cut[i + 1]]
    return present, acc


def score_parts(
    parts: Sequence[Part], avg: tuple[float, float, float], formula: Formula
) -> tuple[np.ndarray, np.ndarray]:
    """Every chunk of ``parts`` (keys ascending) and its exact score: all the
    postings, summed in query-term order (the order the SQL sums in)."""
    keys, sums = field_sums(sorted(parts, key=lambda part: part.term), avg, formula)
    return keys, sums.max(axis=0, initial=0.0)


def exact_sums(
    parts: Sequence[Part],
    keys: np.ndarray,
    avg: tuple[float, float, float],
    formula: Formula,
) -> np.ndarray:
    """Per-field sums ``(3, len(keys))`` of the chunks ``keys`` (distinct, ascending)
    over all their postings in ``parts``, added in query-term order as
    :func:`field_sums` would over each term's whole list."""
    acc = np.zeros((3, len(keys)))
    if not len(keys):
        return acc
    found = [part.postings["key"].astype(np.int64) for part in parts]
    top = max(int(f.max(initial=0)) for f in found) + 1
    where: np.ndarray | None = None
    if top <= 16 * sum(len(f) for f in found):
        where = np.full(top, -1, dtype=np.int32)
        where[keys] = np.arange(len(keys))
    hits = []
    for part_keys in found:
        if where is not None:
            idx = where[part_keys]
        else:
            at = np.minimum(np.searchsorted(keys, part_keys), len(keys) - 1)
            idx = np.where(keys[at] == part_keys, at, -1)
        hits.append(np.flatnonzero(idx >= 0))
        hits[-1] = np.stack((hits[-1], idx[hits[-1]]))
    rows = [parts[i].postings[hits[i][0]].astype(_NATIVE) for i in range(len(parts))]
    t1, t2 = formula.tables(
        max(int(r["tf"].max(initial=0)) for r in rows),
        max(int(r["len"].max(initial=0)) for r in rows),
    )
    for i in sorted(range(len(parts)), key=lambda i: parts[i].term):
        tf, length, idx = rows[i]["tf"], rows[i]["len"], hits[i][1]
        for f in range(3):
            nz = np.flatnonzero(tf[:, f] > 0)
            t = tf[nz, f]
            c = (parts[i].weights[f] * t) / (t1[t] + t2[length[nz, f]] / avg[f])
            acc[f, idx[nz]] += c
    return acc


def ranked(keys: np.ndarray, scores: np.ndarray, m: int) -> np.ndarray:
    """Indices of the ``m`` best (ties at the cut included), score descending then
    key ascending: the exhaustive statement's ``ORDER BY score DESC, chunk_key``."""
    if len(scores) > m:
        cut = np.partition(scores, len(scores) - m)[len(scores) - m]
        sel = np.flatnonzero(scores >= cut)
    else:
        sel = np.arange(len(scores))
    order: np.ndarray = np.lexsort((keys[sel], -scores[sel]))
    return np.asarray(sel[order])
