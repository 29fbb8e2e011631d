"""BM25 from in-memory postings: :mod:`ragline.text.bm25`'s scores, from sparse matrices.

One ``docs × terms`` CSC matrix of term frequencies per BM25 field
(:class:`~ragline.store.postings.Postings`) (title,
headings, text), built with ragline's own analyser (:func:`bm25.chunk_terms`),
so a language-aware analyser there applies here unchanged. Statistics (N, df,
avgdl) are taken over the rows the index holds when a query runs, so a score is
exactly what the exhaustive scorer (:func:`bm25.field_score` +
:func:`bm25.combine_fields`) gives for the same rows, up to float64 rounding.

A query touches only the postings of its own terms (one column slice per term
and field): the cost grows with the matching postings, not the corpus.
:meth:`KeywordIndex.top` goes further and skips most of them (MaxScore over
per-term score bounds kept with the index) while returning exactly the top-k of
the exhaustive :meth:`KeywordIndex.scores`. The index is immutable once
published (:meth:`KeywordIndex.hold_saturations` runs before a snapshot is, and
changes no score); :meth:`KeywordIndex.appended` and :meth:`KeywordIndex.kept`
return new ones, so a reader holding one is never disturbed by a refresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ragline.store.postings import Postings, stacked_csc
from ragline.store.vector_index import top_k_positive
from ragline.text.bm25 import K1, KEYWORD_FIELDS, B, FieldTerms

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Postings scored per step when the per-term bounds are built (bounds the temporaries).
_BOUND_STEP = 1 << 20
#: Relative slack on every bound comparison: the pruned and the exhaustive scorer sum
#: the same float64 terms in different orders, which moves a score by ~1e-15.
_SLACK = 1e-9
#: A binary search per row costs about this many postings read in one pass.
_PROBE_COST = 8
#: Below this many rows :meth:`KeywordIndex.top` scores every posting: the pruning's
#: fixed costs (bounds, binary searches, numpy calls per list) outweigh what it skips
#: (benchmarks/results/search_core.md, section "Exact BM25 top-k with MaxScore").
PRUNE_MIN_ROWS = 250_000


def _field_norms(lengths: FloatArray, k1: float, b: float) -> tuple[int, FloatArray]:
    """(N, per-row ``k1·(1 − b + b·dl/avgdl)``) over rows whose field has tokens."""
    n = int(np.count_nonzero(lengths))
    avgdl = float(lengths.sum()) / n if n else 0.0
    if avgdl > 0:
        return n, k1 * (1.0 - b + b * lengths / avgdl)
    return n, np.full(lengths.shape, k1 * (1.0 - b))


def saturation_peaks(m: Postings, norm: FloatArray) -> npt.NDArray[np.float32]:
    """Per column of ``m``, the largest ``tf / (tf + norm[row])`` over its postings
    (0 for an empty column), rounded up to float32: a term's BM25 weight times this
    bounds what it adds to any row's field score. Postings are scored ``_BOUND_STEP``
    at a time, so the temporaries stay small next to the postings themselves."""
    width = m.shape[1]
    out = np.zeros(width, np.float64)
    indptr = np.asarray(m.indptr, np.int64)
    col = 0
    while col < width:
        end = int(np.searchsorted(indptr, indptr[col] + _BOUND_STEP, side="right")) - 1
        end = min(max(end, col + 1), width)
        lo, hi = int(indptr[col]), int(indptr[end])
        if hi > lo:
            tf = m.data[lo:hi]
            sat = norm[m.indices[lo:hi]]
            sat += tf
            np.divide(tf, sat, out=sat)
            starts = indptr[col:end] - lo
            filled = starts < hi - lo
            peaks = np.maximum.reduceat(sat, starts[filled])
            # reduceat gives an empty column its successor's first value: keep it 0
            nonempty = np.diff(indptr[col : end + 1])[filled] > 0
            out[col:end][filled] = np.where(nonempty, peaks, 0.0)
        col = end
    peak32 = out.astype(np.float32)
    up: npt.NDArray[np.float32] = np.nextafter(peak32, np.float32(np.inf), dtype=np.float32)
    return np.where(out > 0, up, np.float32(0))


def distinct(rows: npt.NDArray[np.integer]) -> IntArray:
    """``rows`` sorted, without repeats, as int64 (numpy's hash-based ``unique`` is
    several times slower on these sizes)."""
    out = np.sort(rows.astype(np.int64))
    if len(out) > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out


def compact(values: Sequence[int]) -> npt.NDArray[np.uint16] | npt.NDArray[np.float32]:
    """Term counts (or in-batch row numbers) as uint16 when they fit, else float32."""
    a = np.asarray(values, dtype=np.int64)
    return a.astype(np.uint16) if not len(a) or int(a.max()) <= 0xFFFF else a.astype(np.float32)


class KeywordIndex:
    """Term frequencies and field lengths of a set of rows (row i = the i-th chunk)."""

    __slots__ = ("_held", "_n", "_norms", "_peaks", "b", "k1", "lengths", "tf", "vocab")

    def __init__(
        self,
        vocab: Mapping[str, int],
        tf: Sequence[Postings],
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
        pairs = zip(self.tf, self._norms, strict=True)
        self._peaks = tuple(saturation_peaks(m, norm) for m, norm in pairs)
        self._held: tuple[FloatArray, ...] | None = None

    def hold_saturations(self) -> None:
        """Compute every posting's ``tf / (tf + norm)`` now and keep it (8 bytes per
        posting): a query then reads one array per list instead of gathering the
        rows' norms and dividing, and its scores stay bit for bit the same (the same
        float64 operations, done once). For the in-memory tier, where the postings
        are few enough (benchmarks/results/search_core.md, section 14)."""
        if self._held is None:
            held = []
            for m, norm in zip(self.tf, self._norms, strict=True):
                sat = norm[m.indices]
                sat += m.data
                np.divide(m.data, sat, out=sat)
                held.append(sat)
            self._held = tuple(held)

    @property
    def nbytes_held(self) -> int:
        """Bytes of the saturations :meth:`hold_saturations` keeps (0 before)."""
        return sum(a.nbytes for a in self._held) if self._held is not None else 0

    def _field_scores(
        self, f: int, spans: list[tuple[int, int]], weights: list[float]
    ) -> FloatArray:
        """Field ``f``'s BM25 score of every row: the posting lists ``lo:hi`` with their
        weights, summed per row in list order. All lists go through one ``add.at``
        (one pass, summing in list order like a loop over the lists, so the same
        float64 sums): a query's numpy calls stay few whatever its terms."""
        acc = np.zeros(self.rows)
        if len(spans) == 1:  # one list: its rows are distinct
            (lo, hi), w = spans[0], weights[0]
            acc[self.tf[f].indices[lo:hi]] = self._weighted(f, lo, hi, w)
            return acc
        indices = self.tf[f].indices
        rows = np.concatenate([indices[lo:hi] for lo, hi in spans])
        if self._held is not None:
            part = np.concatenate([self._held[f][lo:hi] for lo, hi in spans])
            part *= np.repeat(weights, [hi - lo for lo, hi in spans])
        else:
            pairs = zip(spans, weights, strict=True)
            part = np.concatenate([self._weighted(f, lo, hi, w) for (lo, hi), w in pairs])
        np.add.at(acc, rows, part)
        return acc

    def _weighted(self, f: int, lo: int, hi: int, weight: float) -> FloatArray:
        """``weight · tf / (tf + norm)`` of the postings ``lo:hi`` of field ``f``, as a
        new array: from the held saturations, else computed."""
        if self._held is not None:
            out: FloatArray = self._held[f][lo:hi] * weight
            return out
        m = self.tf[f]
        tf = m.data[lo:hi]
        part: FloatArray = self._norms[f][m.indices[lo:hi]]
        part += tf
        np.divide(tf, part, out=part)
        part *= weight
        return part

    @classmethod
    def empty(cls, k1: float = K1, b: float = B) -> KeywordIndex:
        fields = len(KEYWORD_FIELDS)
        return cls(
            {},
            [Postings.empty() for _ in range(fields)],
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
            [m.rows_at(keep) for m in self.tf],
            [dl[keep] for dl in self.lengths],
            self.k1,
            self.b,
        )

    def _postings(
        self, query: Mapping[str, int], boosts: Sequence[float]
    ) -> list[tuple[int, int, int, int, float]]:
        """(field, column, lo, hi, weight) of each non-empty posting list the query
        reads, field by field and in query order (the exhaustive scorer's order);
        weight = count · idf · (k1 + 1), the factor of a posting's saturation."""
        out = []
        cols = [(self.vocab[t], c) for t, c in query.items() if t in self.vocab]
        for f, boost in enumerate(boosts):
            if boost <= 0:
                continue
            m, n = self.tf[f], self._n[f]
            for col, count in cols:
                lo, hi = int(m.indptr[col]), int(m.indptr[col + 1])
                if lo == hi:
                    continue
                df = hi - lo
                idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
                out.append((f, col, lo, hi, count * idf * (self.k1 + 1.0)))
        return out

    def exact(
        self, query: Mapping[str, int], boosts: Sequence[float], rows: IntArray
    ) -> FloatArray:
        """``scores(query, boosts)[rows]`` for ascending distinct ``rows``, bit for bit:
        each row's field sums add the same float64 terms in the same order, found by
        binary search in the posting lists instead of a pass over them."""
        return self._exact(self._postings(query, boosts), boosts, rows)

    def _exact(
        self, lists: list[tuple[int, int, int, int, float]], boosts: Sequence[float], rows: IntArray
    ) -> FloatArray:
        """:meth:`exact` over the posting lists :meth:`_postings` gave."""
        best: FloatArray | None = None
        for f, boost in enumerate(boosts):
            mine = [x for x in lists if x[0] == f]
            if not mine:
                continue
            acc = np.zeros(len(rows))
            for _, _, lo, hi, weight in mine:
                found, part = self._lookup(f, lo, hi, weight, rows)
                acc[found] += part
            if boost != 1.0:
                acc *= boost
            if best is None:
                best = acc
            else:
                np.maximum(best, acc, out=best)
        return np.zeros(len(rows)) if best is None else best

    def top(
        self,
        query: Mapping[str, int],
        boosts: Sequence[float],
        k: int,
        allowed: BoolArray | None = None,
        min_rows: int | None = None,
    ) -> tuple[IntArray, FloatArray]:
        """The ``k`` best rows among ``allowed`` (all when None) with a score above 0,
        best first, and their scores: exactly ``top_k(scores(query, boosts), k,
        allowed)`` less the zero scores — the same rows, the same float64 scores and
        ties to the lower row — without scoring every posting (MaxScore). An index
        of fewer than ``min_rows`` rows (default :data:`PRUNE_MIN_ROWS`) is scored
        exhaustively, which is faster there.

        Why it is exact: a row's score is at most the sum, over the query terms it
        holds, of each term's bound U (its weight × its largest saturation in any
        field × the field's boost; the saturations are kept per column and field).
        Terms are read in decreasing U, all their postings, into per-field partial
        sums. θ, a score that k distinct allowed rows reach (the exact scores of the
        k read rows with the best partial sums, or the k-th best partial sum, which
        no exact score is below), never exceeds the true k-th score. Reading stops
        once the unread terms' U sum to less than θ: a row holding none of the read
        terms stays below θ (one more term is read while that is cheaper than the
        lookups below; that only changes the cost). A read row stays only while its
        partial sum plus the U of the terms not yet looked up reaches θ (MaxScore
        per row, the unread terms looked up by binary search, or read whole when
        that is cheaper). The rows
        left are scored by :meth:`exact`, bit for bit as :meth:`scores`, and ranked
        by ``top_k_positive``. Comparisons carry a 1e-9 relative slack for float64 summation
        order, so pruning only ever keeps more rows than it must;
        tests/store/test_keyword_index.py checks the result against the exhaustive
        scorer on random corpora, boosts, masks and ties."""
        if self.rows < (PRUNE_MIN_ROWS if min_rows is None else min_rows):
            # small: one pass over every posting is cheaper
            scores = self.scores(query, boosts)
            best = top_k_positive(scores, k, allowed)
            return best, scores[best]
        lists = self._postings(query, boosts)
        if k <= 0 or not lists:
            return np.zeros(0, np.int64), np.zeros(0)
        bound: dict[int, float] = {}
        for f, col, _, _, weight in lists:
            u = boosts[f] * weight * float(self._peaks[f][col])
            bound[col] = max(bound.get(col, 0.0), u)
        order = sorted(bound, key=lambda c: (-bound[c], c))
        rest = [0.0] * (len(order) + 1)  # rest[i]: the bounds of order[i:] summed
        for i in range(len(order) - 1, -1, -1):
            rest[i] = rest[i + 1] + bound[order[i]] * (1.0 + _SLACK)
        acc: dict[int, FloatArray] = {}
        read: list[tuple[int, npt.NDArray[np.integer]]] = []
        theta = 0.0
        done = 0
        pool = np.zeros(0, np.int64)  # rows whose exact scores give θ
        while done < len(order) and (
            rest[done] >= theta
            or self._cheaper_to_read(lists, order, done, read, acc, boosts, theta - rest[done])
        ):
            col = order[done]
            done += 1
            fresh = len(read)
            for f, c, lo, hi, weight in lists:
                if c != col:
                    continue
                postings = self._accumulate(acc, f, lo, hi, weight)
                read.append((f, postings if allowed is None else postings[allowed[postings]]))
            pool = self._pool(pool, read[fresh:], acc, boosts, k)
            if len(pool) == k:
                now = float(self._exact(lists, boosts, pool).min()) * (1.0 - _SLACK)
                theta = max(theta, now)
        rows, fields = self._survivors(read, acc, boosts, theta - rest[done])
        for i in range(done, len(order) + 1):  # MaxScore per row over the unread terms
            sums = self._combined(fields, boosts)
            if len(rows) > k:  # k distinct rows reach their partial sums: θ rises
                kth = float(np.partition(sums, len(sums) - k)[len(sums) - k])
                theta = max(theta, kth * (1.0 - _SLACK))
            keep = sums * (1.0 + _SLACK) + rest[i] >= theta
            rows = rows[keep]
            fields = {f: a[keep] for f, a in fields.items()}
            if i == len(order):
                break
            mine = [x for x in lists if x[1] == order[i]]
            if len(rows) * _PROBE_COST < sum(hi - lo for _, _, lo, hi, _ in mine):
                for f, _, lo, hi, weight in mine:  # few rows left: binary search
                    found, part = self._lookup(f, lo, hi, weight, rows)
                    if f not in fields:
                        fields[f] = np.zeros(len(rows))
                    fields[f][found] += part
            else:  # many: one pass over the postings, as the read terms had
                for f, _, lo, hi, weight in mine:
                    before = acc[f][rows] if f in acc else np.zeros(len(rows))
                    self._accumulate(acc, f, lo, hi, weight)
                    gained = acc[f][rows] - before
                    fields[f] = fields[f] + gained if f in fields else gained
        scores = self._exact(lists, boosts, rows)
        best = top_k_positive(scores, k, None)
        return rows[best], scores[best]

    def _cheaper_to_read(
        self,
        lists: list[tuple[int, int, int, int, float]],
        order: list[int],
        done: int,
        read: list[tuple[int, npt.NDArray[np.integer]]],
        acc: Mapping[int, FloatArray],
        boosts: Sequence[float],
        floor: float,
    ) -> bool:
        """Whether reading the next term whole costs less than looking the unread
        terms up for the rows that would survive now (counted on the first list read,
        a lower bound): reading lowers the unread bounds, so fewer rows survive."""
        f, postings = read[0]
        v = acc[f][postings]
        v *= boosts[f]
        alive = int(np.count_nonzero(v * (1.0 + _SLACK) >= floor))
        unread = set(order[done:])
        probes = alive * _PROBE_COST * sum(1 for x in lists if x[1] in unread)
        return probes > sum(hi - lo for _, c, lo, hi, _ in lists if c == order[done])

    def _pool(
        self,
        pool: IntArray,
        fresh: list[tuple[int, npt.NDArray[np.integer]]],
        acc: Mapping[int, FloatArray],
        boosts: Sequence[float],
        k: int,
    ) -> IntArray:
        """The ``k`` rows (fewer when the lists hold fewer) with the best partial sums
        among ``pool`` and the k best of each list just read: distinct allowed rows
        whose exact scores give θ, found without going over the earlier lists again."""
        tops: list[npt.NDArray[np.integer]] = [pool]
        for f, postings in fresh:
            v = acc[f][postings]
            best = np.argpartition(v, len(v) - k)[len(v) - k :] if len(v) > k else slice(None)
            tops.append(postings[best])
        rows = distinct(np.concatenate(tops))
        if len(rows) > k:
            part = self._combined({f: a[rows] for f, a in acc.items()}, boosts)
            rows = np.sort(rows[np.argpartition(part, len(part) - k)[len(part) - k :]])
        return rows

    @staticmethod
    def _survivors(
        read: list[tuple[int, npt.NDArray[np.integer]]],
        acc: Mapping[int, FloatArray],
        boosts: Sequence[float],
        floor: float,
    ) -> tuple[IntArray, dict[int, FloatArray]]:
        """The rows of the lists read whose best boosted partial field sum reaches
        ``floor`` (ascending, distinct), with their partial sums per field."""
        picked = []
        for f, postings in read:
            v = acc[f][postings]
            v *= boosts[f]
            picked.append(postings[v * (1.0 + _SLACK) >= floor])
        rows = distinct(np.concatenate(picked))
        return rows, {f: a[rows] for f, a in acc.items()}

    def _accumulate(
        self, acc: dict[int, FloatArray], f: int, lo: int, hi: int, weight: float
    ) -> npt.NDArray[np.integer]:
        """Add the posting list ``lo:hi`` of field ``f`` to the field's partial sums
        (a dense array per field, made on first use); returns its rows."""
        postings: npt.NDArray[np.integer] = self.tf[f].indices[lo:hi]
        part = self._weighted(f, lo, hi, weight)
        if f in acc:
            np.add.at(acc[f], postings, part)
        else:  # a field's first list: its rows are distinct, so a plain store
            acc[f] = np.zeros(self.rows)
            acc[f][postings] = part
        return postings

    @staticmethod
    def _combined(fields: Mapping[int, FloatArray], boosts: Sequence[float]) -> FloatArray:
        """The best boosted field sum per row (partial sums: a lower bound)."""
        out: FloatArray | None = None
        for f, a in fields.items():
            v = a * boosts[f]
            out = v if out is None else np.maximum(out, v, out=out)
        assert out is not None
        return out

    def _lookup(
        self, f: int, lo: int, hi: int, weight: float, rows: IntArray
    ) -> tuple[BoolArray, FloatArray]:
        """Which of ``rows`` (ascending) hold the posting list ``lo:hi`` of field ``f``,
        and their terms ``weight · tf / (tf + norm)``, computed as :meth:`scores` does."""
        m = self.tf[f]
        postings = m.indices[lo:hi]
        # keys of the postings' own dtype: int64 keys would convert the whole list
        at = np.searchsorted(postings, rows.astype(postings.dtype, copy=False))
        found = at < hi - lo
        found[found] = postings[at[found]] == rows[found]
        if self._held is not None:
            part: FloatArray = self._held[f][lo:hi][at[found]] * weight
            return found, part
        tf = m.data[lo:hi][at[found]]
        part = self._norms[f][rows[found]]
        part += tf
        np.divide(tf, part, out=part)
        part *= weight
        return found, part

    def scores(self, query: Mapping[str, int], boosts: Sequence[float]) -> FloatArray:
        """Each row's BM25 score for the query's term counts: the best boosted field
        (0 where no field matches). ``boosts`` follow :data:`bm25.KEYWORD_FIELDS`."""
        best: FloatArray | None = None
        lists = self._postings(query, boosts)
        for f, boost in enumerate(boosts):
            spans = [(lo, hi) for g, _, lo, hi, _ in lists if g == f]
            weights = [w for g, *_, w in lists if g == f]  # × tf / (tf + norm)
            acc = self._field_scores(f, spans, weights) if spans else None
            if acc is None:
                continue
            if boost != 1.0:
                acc *= boost
            if best is None:
                best = acc
            else:
                np.maximum(best, acc, out=best)
        return np.zeros(self.rows) if best is None else best
