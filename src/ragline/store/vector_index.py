"""Exact cosine top-k over an in-memory float32 matrix, and the top-k selection both
in-memory indexes share.

Rows are L2-normalised once when added, so a query costs one matrix-vector product
(BLAS) and an ``argpartition``: the exhaustive ranking, with the cosine LanceDB's
``cosine`` distance gives (``1 − distance``). A zero vector has no cosine (LanceDB
returns NaN for it) and is never returned. Immutable like
:class:`~ragline.store.keyword_index.KeywordIndex`.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # scans the loaded libraries once


def top_k(scores: npt.NDArray[np.floating], k: int, allowed: BoolArray | None) -> IntArray:
    """Positions of the ``k`` highest scores among ``allowed`` rows (all when None),
    best first; ties go to the lower position, also at the k-th place."""
    idx = np.flatnonzero(allowed) if allowed is not None else np.arange(len(scores))
    if k <= 0 or not len(idx):
        return np.zeros(0, dtype=np.int64)
    if len(idx) > k:
        s = scores[idx]
        kth = -np.partition(-s, k - 1)[k - 1]  # the k-th highest score
        above = idx[s > kth]
        idx = np.concatenate([above, idx[s == kth][: k - len(above)]])
    order = np.lexsort((idx, -scores[idx]))
    return idx[order].astype(np.int64)


def inverse_norms(vectors: npt.NDArray[np.float32]) -> FloatArray:
    """1 / L2 length of each row (0 for a zero row), accumulated in float64 without
    a float64 copy of the matrix."""
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))
    out: FloatArray = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return out


class VectorIndex:
    """The stored vectors (row i = the i-th chunk) and their inverse lengths (0 for a
    zero vector, which has no cosine)."""

    __slots__ = ("inverse_norms", "matrix")

    def __init__(self, matrix: npt.NDArray[np.float32], inverse_norms: FloatArray) -> None:
        self.matrix = matrix
        self.inverse_norms = inverse_norms

    @classmethod
    def empty(cls, dimension: int) -> VectorIndex:
        return cls(np.zeros((0, dimension), np.float32), np.zeros(0))

    @property
    def rows(self) -> int:
        return int(self.matrix.shape[0])

    @classmethod
    def of(cls, matrix: npt.NDArray[np.float32]) -> VectorIndex:
        """An index over ``matrix`` itself (no copy when it is C-contiguous float32)."""
        m = np.ascontiguousarray(matrix, dtype=np.float32)
        return cls(m, inverse_norms(m))

    def appended(self, vectors: npt.NDArray[np.float32]) -> VectorIndex:
        """This index plus ``vectors``."""
        if not len(vectors):
            return self
        v = np.asarray(vectors, dtype=np.float32)
        return VectorIndex(
            np.ascontiguousarray(np.concatenate([self.matrix, v])),
            np.concatenate([self.inverse_norms, inverse_norms(v)]),
        )

    def kept(self, keep: IntArray) -> VectorIndex:
        """Only the rows at positions ``keep``."""
        if len(keep) == self.rows:
            return self
        return VectorIndex(np.ascontiguousarray(self.matrix[keep]), self.inverse_norms[keep])

    def raw(self, positions: IntArray) -> npt.NDArray[np.float32]:
        """The stored vectors at ``positions``."""
        out: npt.NDArray[np.float32] = self.matrix[positions]
        return out

    def search(
        self, query: npt.NDArray[np.float32], k: int, allowed: BoolArray | None
    ) -> tuple[IntArray, FloatArray]:
        """(positions, cosines) of the ``k`` rows most similar to ``query`` (none for a
        zero query, which has no cosine to anything)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        # One BLAS thread: a threaded matrix-vector product spin-waits for cores that
        # concurrent searches (and other processes) hold; on 2 busy cores it took
        # 35 ms p95 instead of 7 ms for 9k × 384 (benchmarks/results/profile.md).
        with _blas().limit(limits=1, user_api="blas"):
            sims = (self.matrix @ (q / norm)) * self.inverse_norms
        valid = self.inverse_norms > 0
        rows = top_k(sims, k, valid if allowed is None else valid & allowed)
        return rows, sims[rows]
