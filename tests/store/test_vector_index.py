"""VectorIndex: the same ranking as a brute-force cosine scan, in every layout (float32,
int8 codes + float32 or float16 rerank)."""

from __future__ import annotations

import numpy as np
import pytest

from ragline.store.vector_index import (
    VectorIndex,
    VectorLayout,
    layout_for,
    quantise,
    quantise_query,
    reaching_kth,
    top_k,
    top_k_positive,
)


def test_search_is_the_exact_cosine_ranking_under_a_mask() -> None:
    rng = np.random.default_rng(0)
    scale = rng.uniform(0.1, 5, (500, 1)).astype(np.float32)
    vectors = rng.standard_normal((500, 16)).astype(np.float32) * scale
    index = VectorIndex.empty(16).appended(vectors[:200]).appended(vectors[200:])
    q = rng.standard_normal(16).astype(np.float32)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ (q / np.linalg.norm(q))
    allowed = rng.random(500) < 0.3
    rows, sims = index.search(q, 20, allowed)
    want = np.flatnonzero(allowed)[np.argsort(-cos[allowed])][:20]
    assert rows.tolist() == want.tolist()
    np.testing.assert_allclose(sims, cos[want], rtol=1e-5)


def test_zero_vectors_and_zero_queries_have_no_cosine() -> None:
    vectors = np.array([[1, 0], [0, 0], [0.6, 0.8]], dtype=np.float32)
    index = VectorIndex.empty(2).appended(vectors)
    rows, _ = index.search(np.array([1, 0], np.float32), 5, None)
    assert rows.tolist() == [0, 2]
    rows, _ = index.search(np.zeros(2, np.float32), 5, None)
    assert rows.tolist() == []


LAYOUTS = [
    VectorLayout(True, False),
    VectorLayout(False, True),
    VectorLayout(False, True, 20, 1, 2),
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_empty_index_finds_nothing(layout: VectorLayout) -> None:
    rows, sims = VectorIndex.empty(4, layout).search(np.ones(4, np.float32), 5, None)
    assert rows.tolist() == [] and sims.tolist() == []


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_mask_that_allows_no_row_finds_nothing(layout: VectorLayout) -> None:
    vectors = np.random.default_rng(9).standard_normal((40, 4)).astype(np.float32)
    index = VectorIndex.of(vectors, layout)
    rows, sims = index.search(vectors[0], 5, np.zeros(40, dtype=bool))
    assert rows.tolist() == [] and sims.tolist() == []
    assert index.search(vectors[0], 5, None)[0].tolist()[0] == 0


def test_kept_drops_rows() -> None:
    index = VectorIndex.empty(2).appended(np.array([[1, 0], [0, 1], [1, 1]], np.float32))
    kept = index.kept(np.array([0, 2]))
    rows, _ = kept.search(np.array([0, 1], np.float32), 5, None)
    assert rows.tolist() == [1, 0]


def _clustered(rows: int, dim: int, seed: int) -> np.ndarray:
    """Vectors around 50 centres, like embeddings of a corpus (near neighbours exist)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((50, dim)).astype(np.float32)
    noise = rng.standard_normal((rows, dim)).astype(np.float32) * 0.4
    out: np.ndarray = centres[rng.integers(0, 50, rows)] + noise
    return out


def _exact(vectors: np.ndarray, q: np.ndarray, allowed: np.ndarray | None, k: int) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ (q / np.linalg.norm(q))
    pos = np.arange(len(vectors)) if allowed is None else np.flatnonzero(allowed)
    return pos[np.argsort(-cos[pos], kind="stable")][:k]


def test_quantise_keeps_each_row_within_half_a_step() -> None:
    rng = np.random.default_rng(1)
    units = rng.standard_normal((100, 32)).astype(np.float32)
    units[7] = 0
    codes, step = quantise(units)
    assert codes.dtype == np.int8 and np.abs(codes.astype(int)).max() == 127
    assert step[7] == 0 and not codes[7].any()
    err = np.abs(codes * step[:, None] - units)
    assert (err <= step[:, None] / 2 + 1e-6).all()


@pytest.mark.parametrize(("float32", "threads"), [(True, 1), (False, 1), (True, 2)])
def test_int8_scan_with_rerank_finds_the_exact_top_k(float32: bool, threads: int) -> None:
    vectors = _clustered(5000, 64, 2)
    layout = VectorLayout(float32=float32, int8=True, rerank=2, threads=threads)
    index = VectorIndex.of(vectors, layout)
    assert index.codes is not None and (index.matrix is not None) == float32
    rng = np.random.default_rng(3)
    allowed = rng.random(5000) < 0.5
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for i in range(20):
        q = vectors[i * 100] + rng.standard_normal(64).astype(np.float32)
        mask = allowed if i % 2 else None
        rows, sims = index.search(q, 50, mask)
        want = _exact(vectors, q, mask, 50)
        cos = unit[rows] @ (q / np.linalg.norm(q))
        if float32:
            assert rows.tolist() == want.tolist()
            np.testing.assert_allclose(sims, cos, rtol=1e-5)
        else:  # float16 rows: near-ties may swap, nothing far from the exact top-k enters
            assert len(set(rows.tolist()) & set(want.tolist())) >= 49
            np.testing.assert_allclose(sims, cos, atol=2e-3)
            assert (np.diff(sims) <= 0).all()


def test_a_rerank_that_covers_every_row_is_the_float32_ranking() -> None:
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    q = rng.standard_normal(8).astype(np.float32)
    exact = VectorIndex.of(vectors)
    coded = VectorIndex.of(vectors, VectorLayout(float32=True, int8=True, rerank=30))
    a, sa = exact.search(q, 10, None)
    b, sb = coded.search(q, 10, None)
    assert a.tolist() == b.tolist()
    np.testing.assert_allclose(sa, sb, rtol=1e-6)


def test_kept_and_appended_rows_search_like_a_fresh_build() -> None:
    vectors = _clustered(1200, 32, 5)
    vectors[10] = 0  # a zero vector is never returned, in any layout
    layout = VectorLayout(float32=False, int8=True, rerank=2)
    keep = np.arange(0, 1200, 3)
    built = VectorIndex.of(vectors[:600], layout).appended(vectors[600:]).kept(keep)
    fresh = VectorIndex.of(vectors[keep], layout)
    q = vectors[99]
    rows, sims = built.search(q, 30, None)
    want_rows, want_sims = fresh.search(q, 30, None)
    assert rows.tolist() == want_rows.tolist()
    np.testing.assert_array_equal(sims, want_sims)
    everything, _ = VectorIndex.of(vectors, layout).search(q, 1200, None)
    assert 10 not in everything.tolist() and len(everything) == 1199


def test_layouts_follow_the_row_limits() -> None:
    assert layout_for(10, 100, 50, 2) == VectorLayout(True, False, 2)
    assert layout_for(60, 100, 50, 2) == VectorLayout(True, True, 2)
    assert layout_for(101, 100, 500, 3) == VectorLayout(False, True, 3)
    assert layout_for(101, 100, 500, 3, threads=2) == VectorLayout(False, True, 3, 2)
    with pytest.raises(ValueError, match="float32"):
        VectorIndex.of(np.ones((2, 2), np.float32), VectorLayout(False, True)).raw(np.array([0]))


def test_principal_component_codes_find_the_top_k_under_a_mask() -> None:
    """Codes of 16 of 64 principal components, 20 × k re-scored from float16 rows: the
    exact top-k among the allowed rows, but for near-ties (recall ≥ 0.98 here)."""
    vectors = _clustered(5000, 64, 6)
    layout = layout_for(5000, 100, 0, 2, 1, dims=16, dims_rerank=20)
    assert layout == VectorLayout(False, True, 20, 1, 16)
    index = VectorIndex.of(vectors, layout)
    assert index.codes is not None and index.codes.shape == (5000, 16)
    assert index.basis is not None and index.basis.shape == (64, 16)
    rng = np.random.default_rng(7)
    allowed = rng.random(5000) < 0.4
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    found = 0
    for i in range(20):
        q = vectors[i * 50] + rng.standard_normal(64).astype(np.float32)
        mask = allowed if i % 2 else None
        rows, sims = index.search(q, 50, mask)
        assert mask is None or mask[rows].all()
        found += len(set(rows.tolist()) & set(_exact(vectors, q, mask, 50).tolist()))
        np.testing.assert_allclose(sims, unit[rows] @ (q / np.linalg.norm(q)), atol=2e-3)
    assert found / (20 * 50) >= 0.98
    # two components of 64 cannot tell these rows apart: far fewer of the top-k
    coarse = VectorIndex.of(vectors, VectorLayout(False, True, 2, 1, 2))
    q = vectors[0] + rng.standard_normal(64).astype(np.float32)
    rows, _ = coarse.search(q, 50, None)
    assert len(set(rows.tolist()) & set(_exact(vectors, q, None, 50).tolist())) < 45


def test_principal_component_codes_keep_their_basis_through_refreshes() -> None:
    vectors = _clustered(1500, 32, 8)
    layout = VectorLayout(False, True, 20, 1, 8)
    first = VectorIndex.of(vectors[:1000], layout)
    keep = np.arange(0, 1000, 2)
    refreshed = first.kept(keep).appended(vectors[1000:])
    assert refreshed.basis is first.basis  # new rows are coded on the kept basis
    assert refreshed.codes is not None and first.codes is not None
    np.testing.assert_array_equal(refreshed.codes[:500], first.codes[keep])
    rows = np.concatenate([keep, np.arange(1000, 1500)])
    for i in (3, 1200):
        got, _ = refreshed.search(vectors[i], 20, None)
        want = _exact(vectors[rows], vectors[i], None, 20)
        assert len(set(got.tolist()) & set(want.tolist())) >= 19
    with pytest.raises(ValueError, match="float16"):
        VectorIndex.of(vectors, VectorLayout(True, True, 2, 1, 8))


def sorted_top(scores: np.ndarray, k: int, allowed: np.ndarray | None) -> list[int]:
    """The top-k by a full sort: score descending, then position."""
    rows = [i for i in range(len(scores)) if allowed is None or allowed[i]]
    return sorted(rows, key=lambda i: (-scores[i], i))[: max(k, 0)]


def test_top_k_is_the_sorted_order_with_ties_to_the_lower_row() -> None:
    rng = np.random.default_rng(5)
    for trial in range(200):
        n = int(rng.integers(0, 300))
        scores = rng.integers(0, 6, n).astype(np.float64)  # many ties at every value
        allowed = None if trial % 2 else rng.random(n) < 0.7
        k = int(rng.choice([0, 1, 5, 50, 400]))
        assert top_k(scores, k, allowed).tolist() == sorted_top(scores, k, allowed)


def test_top_k_positive_is_top_k_without_the_zero_scores() -> None:
    """BM25's selection (most rows 0, runs of equal scores): the rows top_k gives,
    less those scoring 0, whatever the mask, k or share of zeros."""
    rng = np.random.default_rng(6)
    for trial in range(300):
        n = int(rng.integers(0, 400))
        zeros = rng.random(n) < rng.choice([0.0, 0.5, 0.95, 1.0])
        scores = np.where(zeros, 0.0, rng.integers(1, 8, n) / 4.0)
        allowed = None if trial % 3 == 0 else rng.random(n) < 0.6
        k = int(rng.choice([0, 1, 3, 20, 200, 1000]))
        want = [i for i in sorted_top(scores, k, allowed) if scores[i] > 0]
        got = top_k_positive(scores, k, allowed)
        assert got.dtype == np.int64
        assert got.tolist() == want


def test_reaching_kth_is_the_top_k_set_with_every_tie() -> None:
    """The re-score candidates: top_k's rows, plus any row tied with its k-th, ascending."""
    rng = np.random.default_rng(8)
    for trial in range(300):
        n = int(rng.integers(0, 300))
        scores = rng.integers(0, 9, n).astype(np.float32)
        allowed = None if trial % 2 else rng.random(n) < 0.5
        k = int(rng.choice([0, 1, 7, 40, 500]))
        got = reaching_kth(scores, k, allowed).tolist()
        best = sorted_top(scores, k, allowed)
        floor = min((scores[i] for i in best), default=np.inf)
        rows = [i for i in range(n) if allowed is None or allowed[i]]
        assert got == sorted(i for i in rows if scores[i] >= floor)
        assert set(best) <= set(got)


def test_a_query_is_quantised_as_a_row_is() -> None:
    rng = np.random.default_rng(12)
    rows = rng.standard_normal((200, 48)).astype(np.float32)
    rows[3] = 0.0
    rows[7, :] = 0.0
    rows[7, 5] = -2.0  # one component: the peak, negative
    units = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-30)
    codes, _ = quantise(units)
    for unit, want in zip(units, codes, strict=True):
        got = quantise_query(unit)
        assert got.shape == (1, 48) and got.dtype == np.int8
        assert got[0].tolist() == want.tolist()
