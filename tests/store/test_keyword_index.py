"""KeywordIndex: the exhaustive scorer's BM25 (text/bm25.py) from sparse postings."""

from __future__ import annotations

import random

import numpy as np
import pytest
from tests.store.contract import make_chunk

from ragline.store.keyword_index import KeywordIndex, compact
from ragline.store.postings import Postings, stacked_csc
from ragline.store.vector_index import top_k
from ragline.text.bm25 import (
    KEYWORD_FIELDS,
    FieldStats,
    FieldTerms,
    chunk_terms,
    combine_fields,
    field_score,
    query_counts,
    tokenize,
)
from ragline.types import Chunk

WORDS = [
    *("gradient", "descent", "learning", "rate", "convex", "loss", "function", "matrix"),
    *("vector", "tensor", "probability", "bayes", "prior", "posterior", "sampling"),
    *("network", "layer", "attention", "the", "and", "of", "running", "runs"),
]


def corpus(n: int, seed: int) -> list[Chunk]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30)))
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
        n_heads = rng.randint(0, 2)
        heads = tuple(" ".join(rng.choice(WORDS) for _ in range(2)) for _ in range(n_heads))
        out.append(make_chunk(f"d{i}", i, text, title=title, heading_path=heads))
    return out


def exhaustive(chunks: list[Chunk], query: str, boosts: tuple[float, ...]) -> list[float]:
    """text/bm25.py's reference scorer over every chunk, with no index."""
    terms = [chunk_terms(c) for c in chunks]
    stats = {f: FieldStats.of(t[f] for t in terms) for f in KEYWORD_FIELDS}
    q = tokenize(query)
    weights = dict(zip(KEYWORD_FIELDS, boosts, strict=True))
    out = []
    for t in terms:
        per_field = {
            f: field_score(q, t[f], stats[f].df, stats[f].n, stats[f].avgdl) for f in KEYWORD_FIELDS
        }
        out.append(combine_fields(per_field, weights))
    return out


QUERIES = ["gradient descent", "the running network network", "bayes", "unknownword", "of the"]


@pytest.mark.parametrize("boosts", [(2.0, 1.5, 1.0), (0.5, 1.0, 1.0), (0.0, 0.0, 1.0)])
def test_scores_equal_the_exhaustive_scorer(boosts: tuple[float, float, float]) -> None:
    chunks = corpus(300, seed=1)
    index = KeywordIndex.empty().appended([chunk_terms(c) for c in chunks])
    for query in QUERIES:
        got = index.scores(query_counts(query), boosts)
        want = exhaustive(chunks, query, boosts)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_appends_and_removals_keep_scores_exact() -> None:
    """Built in three appends, then rows dropped: statistics follow the rows it holds."""
    chunks = corpus(240, seed=2)
    index = KeywordIndex.empty()
    for part in (chunks[:100], chunks[100:101], chunks[101:]):
        index = index.appended([chunk_terms(c) for c in part])
    keep = np.array([i for i in range(240) if i % 3], dtype=np.int64)
    index = index.kept(keep)
    kept_chunks = [chunks[i] for i in keep]
    assert index.rows == len(kept_chunks)
    for query in QUERIES:
        got = index.scores(query_counts(query), (2.0, 1.5, 1.0))
        np.testing.assert_allclose(got, exhaustive(kept_chunks, query, (2.0, 1.5, 1.0)), atol=1e-12)


def test_empty_index_and_unknown_terms_score_nothing() -> None:
    empty = KeywordIndex.empty()
    assert empty.scores(query_counts("gradient"), (1.0, 1.0, 1.0)).shape == (0,)
    index = empty.appended([chunk_terms(c) for c in corpus(10, seed=3)])
    assert not index.scores(query_counts("zzzz qqqq"), (1.0, 1.0, 1.0)).any()


def test_top_k_orders_by_score_then_position_and_respects_the_mask() -> None:
    scores = np.array([0.5, 2.0, 0.5, 3.0, 0.5, 0.0])
    assert top_k(scores, 3, scores > 0).tolist() == [3, 1, 0]
    assert top_k(scores, 10, scores > 0).tolist() == [3, 1, 0, 2, 4]
    allowed = np.array([True, False, True, False, True, True])
    assert top_k(scores, 2, allowed & (scores > 0)).tolist() == [0, 2]
    assert top_k(scores, 0, None).tolist() == []


def _postings(dense: np.ndarray) -> Postings:
    """``dense`` as CSC postings, built column by column without the code under test."""
    rows, data, indptr = [], [], [0]
    for col in dense.T:
        (at,) = np.nonzero(col)
        rows.append(at)
        data.append(col[at])
        indptr.append(indptr[-1] + len(at))
    return Postings(
        np.concatenate(data).astype(dense.dtype),
        np.concatenate(rows).astype(np.int32),
        np.asarray(indptr, np.int32),
        dense.shape,
    )


def _canonical(m: Postings) -> bool:
    """Rows strictly ascending within every column."""
    spans = zip(m.indptr[:-1], m.indptr[1:], strict=True)
    return all(bool(np.all(np.diff(m.indices[lo:hi]) > 0)) for lo, hi in spans)


def test_stacked_csc_is_vstack_of_the_old_rows_and_the_new_postings() -> None:
    rng = np.random.default_rng(6)
    old_dense = np.where(rng.random((40, 7)) < 0.3, rng.integers(1, 9, (40, 7)), 0)
    old = _postings(old_dense.astype(np.float32))
    width, added = 12, 90
    dense = np.zeros((added, width), np.float32)
    starts: list[int] = []
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    for start in range(0, added, 25):  # batches of new rows, row numbers ascending
        r, c = np.nonzero(rng.random((min(25, added - start), width)) < 0.2)
        v = rng.integers(1, 5, len(r)).astype(np.float32)
        dense[r + start, c] = v
        starts.append(start)
        rows.append(r.astype(np.uint16))
        cols.append(c.astype(np.int32))
        vals.append(v)
    got = stacked_csc(old, starts, rows, cols, vals, added, width)
    want = np.vstack([np.pad(old.dense(), ((0, 0), (0, width - 7))), dense])
    np.testing.assert_array_equal(got.dense(), want)
    assert _canonical(got) and rows == [] and cols == []
    assert stacked_csc(Postings.empty(), [0], [], [], [], 0, 0).shape == (0, 0)


@pytest.mark.parametrize("keep", [[], [0], [1, 4, 5, 9], list(range(12))])
def test_rows_at_keeps_the_chosen_rows_renumbered(keep: list[int]) -> None:
    rng = np.random.default_rng(len(keep))
    dense = np.where(rng.random((12, 6)) < 0.4, rng.integers(1, 300, (12, 6)), 0)
    dense[:, 2] = 0  # an empty column stays empty
    m = _postings(dense.astype(np.uint16))
    got = m.rows_at(np.asarray(keep, np.int64))
    assert got.shape == (len(keep), 6) and got.indices.dtype == m.indices.dtype
    np.testing.assert_array_equal(got.dense(), dense[keep])
    assert _canonical(got) and got.indptr[2] == got.indptr[3]


def test_counts_are_kept_compact_unless_they_do_not_fit() -> None:
    assert compact([1, 3, 65535]).dtype == np.uint16
    big = compact([1, 70000])
    assert big.dtype == np.float32 and big.tolist() == [1.0, 70000.0]


def random_index(rng: np.random.Generator, rows: int) -> KeywordIndex:
    """Rows over a skewed vocabulary (a few terms in most rows, many rare ones), short
    titles and headings, and a block of exact copies so that scores tie."""
    vocab = [f"t{i}" for i in range(40)]
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    items = []
    for _ in range(rows):
        item = {}
        for name, size in zip(KEYWORD_FIELDS, (3, 4, 40), strict=True):
            words = rng.choice(vocab, size=int(rng.integers(0, size + 1)), p=weights)
            tf: dict[str, int] = {}
            for w in words.tolist():
                tf[w] = tf.get(w, 0) + 1
            item[name] = FieldTerms(tf=tf, length=len(words))
        items.append(item)
    for i in rng.choice(rows, size=rows // 5, replace=False).tolist():
        items[i] = items[0]  # copies of row 0: equal scores, ranked by row
    return KeywordIndex.empty().appended(items)


def exhaustive_top(
    index: KeywordIndex,
    query: dict[str, int],
    boosts: tuple[float, float, float],
    k: int,
    allowed: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    scores = index.scores(query, boosts)
    rows = top_k(scores, k, allowed)
    rows = rows[scores[rows] > 0]
    return rows, scores[rows]


def test_pruned_top_k_is_the_exhaustive_top_k() -> None:
    """MaxScore returns the exhaustive scorer's top-k: same rows, same float64 scores,
    ties to the lower row, over random corpora, queries, boosts, masks and k."""
    rng = np.random.default_rng(11)
    checked = 0
    for trial in range(12):
        index = random_index(rng, int(rng.integers(50, 400)))
        vocab = sorted(index.vocab)
        for _ in range(25):
            terms = rng.choice([*vocab, "absent"], size=int(rng.integers(1, 7)))
            query = {str(t): int(rng.integers(1, 3)) for t in terms}
            boosts = tuple(float(b) for b in rng.choice([0.0, 0.5, 1.0, 1.5, 2.0], size=3))
            k = int(rng.choice([1, 3, 10, 50, 1000]))
            allowed = None if trial % 3 == 0 else rng.random(index.rows) < rng.random()
            want_rows, want_scores = exhaustive_top(index, query, boosts, k, allowed)  # type: ignore[arg-type]
            rows, scores = index.top(query, boosts, k, allowed, min_rows=0)
            assert rows.tolist() == want_rows.tolist()
            assert scores.tolist() == want_scores.tolist()  # bit for bit
            checked += len(rows)
    assert checked > 5000


def test_pruned_top_k_follows_appends_and_removals() -> None:
    """Bounds are rebuilt with the rows: after appends and removals the top-k still
    equals the exhaustive one (a stale bound would drop rows)."""
    chunks = corpus(300, seed=9)
    index = KeywordIndex.empty()
    for part in (chunks[:50], chunks[50:]):
        index = index.appended([chunk_terms(c) for c in part])
    index = index.kept(np.array([i for i in range(300) if i % 4], dtype=np.int64))
    index = index.appended([chunk_terms(make_chunk("x", 0, "bayes " * 30, title="bayes"))])
    for query in QUERIES:
        counts = dict(query_counts(query))
        want = exhaustive_top(index, counts, (0.5, 1.5, 1.0), 20, None)
        got = index.top(counts, (0.5, 1.5, 1.0), 20, None, min_rows=0)
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tolist() == want[1].tolist()


def test_exact_scores_rows_as_the_exhaustive_scorer_does() -> None:
    index = KeywordIndex.empty().appended([chunk_terms(c) for c in corpus(200, seed=4)])
    counts = dict(query_counts("gradient descent of the running network"))
    rows = np.array([0, 3, 17, 18, 150, 199], dtype=np.int64)
    full = index.scores(counts, (0.5, 1.5, 1.0))
    assert index.exact(counts, (0.5, 1.5, 1.0), rows).tolist() == full[rows].tolist()


def test_saturation_peaks_bound_every_posting() -> None:
    index = KeywordIndex.empty().appended([chunk_terms(c) for c in corpus(120, seed=5)])
    for f, m in enumerate(index.tf):
        norm = index._norms[f]
        for col in range(m.shape[1]):
            lo, hi = m.indptr[col], m.indptr[col + 1]
            tf = m.data[lo:hi].astype(np.float64)
            sat = tf / (tf + norm[m.indices[lo:hi]])
            peak = float(index._peaks[f][col])
            assert (sat.max() <= peak <= sat.max() * (1 + 1e-6)) if hi > lo else peak == 0.0


def test_held_saturations_change_no_score_bit() -> None:
    """With every posting's saturation precomputed (the in-memory tier), scores, the
    exhaustive and the pruned top-k and the exact scores of given rows are bit for bit
    those computed per query, over random corpora, boosts, masks and k."""
    rng = np.random.default_rng(23)
    compared = 0
    for trial in range(6):
        plain = random_index(rng, int(rng.integers(50, 400)))
        held = KeywordIndex(plain.vocab, plain.tf, plain.lengths, plain.k1, plain.b)
        held.hold_saturations()
        assert held.nbytes_held == 8 * sum(m.nnz for m in plain.tf) > 0
        assert plain.nbytes_held == 0
        vocab = sorted(plain.vocab)
        for _ in range(20):
            terms = rng.choice([*vocab, "absent"], size=int(rng.integers(1, 7)))
            query = {str(t): int(rng.integers(1, 3)) for t in terms}
            boosts = tuple(float(b) for b in rng.choice([0.0, 0.5, 1.0, 1.5], size=3))
            k = int(rng.choice([1, 10, 1000]))
            allowed = None if trial % 2 == 0 else rng.random(plain.rows) < 0.6
            assert held.scores(query, boosts).tolist() == plain.scores(query, boosts).tolist()
            for min_rows in (0, None):  # pruned, then exhaustive
                want = plain.top(query, boosts, k, allowed, min_rows=min_rows)
                got = held.top(query, boosts, k, allowed, min_rows=min_rows)
                assert got[0].tolist() == want[0].tolist()
                assert got[1].tolist() == want[1].tolist()
                compared += len(got[0])
            rows = np.sort(rng.choice(plain.rows, size=10, replace=False)).astype(np.int64)
            want_exact = plain.exact(query, boosts, rows).tolist()
            assert held.exact(query, boosts, rows).tolist() == want_exact
    assert compared > 2000


def per_list_scores(index: KeywordIndex, query: dict[str, int], boosts: tuple[float, ...]):
    """KeywordIndex.scores as one ``acc[rows] += part`` per posting list, in the query's
    order: the summation order the single ``np.add.at`` per field has to keep."""
    best = None
    for f, boost in enumerate(boosts):
        if boost <= 0:
            continue
        m, n, norm = index.tf[f], index._n[f], index._norms[f]
        acc = None
        for term, count in query.items():
            if term not in index.vocab:
                continue
            col = index.vocab[term]
            lo, hi = int(m.indptr[col]), int(m.indptr[col + 1])
            if lo == hi:
                continue
            df = hi - lo
            weight = count * np.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (index.k1 + 1.0)
            tf = m.data[lo:hi]
            part = norm[m.indices[lo:hi]]
            part += tf
            np.divide(tf, part, out=part)
            part *= weight
            acc = np.zeros(index.rows) if acc is None else acc
            acc[m.indices[lo:hi]] += part
        if acc is None:
            continue
        if boost != 1.0:
            acc *= boost
        best = acc if best is None else np.maximum(best, acc)
    return np.zeros(index.rows) if best is None else best


def test_scores_sum_each_field_in_the_order_of_a_loop_over_its_lists() -> None:
    """The fields' sums (one add.at over all lists, held saturations or not) are bit
    for bit those of adding list after list, terms repeated and shared included."""
    rng = np.random.default_rng(31)
    for trial in range(6):
        plain = random_index(rng, int(rng.integers(50, 400)))
        held = KeywordIndex(plain.vocab, plain.tf, plain.lengths, plain.k1, plain.b)
        held.hold_saturations()
        vocab = sorted(plain.vocab)
        for _ in range(20):
            terms = rng.choice([*vocab, "absent"], size=int(rng.integers(1, 8)))
            query = {str(t): int(rng.integers(1, 3)) for t in terms}
            boosts = tuple(float(b) for b in rng.choice([0.0, 0.5, 1.0, 1.5], size=3))
            want = per_list_scores(plain, query, boosts).tobytes()
            assert plain.scores(query, boosts).tobytes() == want, trial
            assert held.scores(query, boosts).tobytes() == want, trial
