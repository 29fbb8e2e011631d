"""VectorIndex: exact cosine top-k, the same ranking as a brute-force scan."""

from __future__ import annotations

import numpy as np

from ragline.store.vector_index import VectorIndex


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


def test_kept_drops_rows() -> None:
    index = VectorIndex.empty(2).appended(np.array([[1, 0], [0, 1], [1, 1]], np.float32))
    kept = index.kept(np.array([0, 2]))
    rows, _ = kept.search(np.array([0, 1], np.float32), 5, None)
    assert rows.tolist() == [1, 0]
