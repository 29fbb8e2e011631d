"""Cosine top-k over the mirror's vectors, and the top-k selection both in-memory
indexes share.

Small tables keep the stored vectors as float32 and rank by one matrix-vector
product (BLAS): the exhaustive ranking, with the cosine LanceDB's ``cosine``
distance gives (``1 − distance``). Large tables scan int8 codes instead (a
quarter of the bytes, SIMD integer dot products from ``simsimd``) and re-score
the best ``⌈rerank × k⌉`` rows exactly (and every row tied with the last of
them), from the float32 rows or, above the float32 limit, from float16 unit rows
(half the memory of float32; the re-scored cosine then differs from the float32
one by ≈ 1e-4). Codes are
per-row: each unit row is scaled so its largest component is ±127, which needs
no statistics over the whole table (a refresh quantises new rows alone) and
gave the best recall of the schemes measured (benchmarks/results/search_core.md,
section 5). Above the float32 limit the codes can hold only the ``dims`` principal
components of the unit rows (a basis from an even sample of the rows, kept while
the index is refreshed): fewer bytes to scan per query, and more candidates re-scored
from the float16 rows make up for the coarser first pass (section 8). A zero
vector has no cosine (LanceDB returns NaN for it) and is never returned.
Immutable once built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import simsimd
from threadpoolctl import ThreadpoolController

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
F32Array = npt.NDArray[np.float32]

#: Largest int8 code magnitude (symmetric, so −code is always representable).
CODE_MAX = 127.0
#: Rows a basis of principal components is estimated from (spread evenly).
BASIS_SAMPLE = 50_000
#: Rows projected onto the basis at a time (bounded temporary memory).
PROJECT_BLOCK = 16_384


@lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # scans the loaded libraries once


def top_k(scores: npt.NDArray[np.floating], k: int, allowed: BoolArray | None) -> IntArray:
    """Positions of the ``k`` highest scores among ``allowed`` rows (all when None),
    best first; ties go to the lower position, also at the k-th place."""
    idx = np.flatnonzero(allowed) if allowed is not None else None
    s = scores if idx is None else scores[idx]
    n = len(s)
    if k <= 0 or not n:
        return np.zeros(0, dtype=np.int64)
    if n > k:
        kth = np.partition(s, n - k)[n - k]  # the k-th highest score
        return _ranked(s, idx, k, kth)
    return _ranked(s, idx, k, None)


def reaching_kth(scores: npt.NDArray[np.floating], k: int, allowed: BoolArray | None) -> IntArray:
    """Positions of the ``allowed`` rows (all when None) scoring at least the ``k``-th
    highest score, ascending: :func:`top_k`'s rows as a set, with every row tied at
    the k-th place (candidates to re-score; no ordering work spent on them). Ties on
    an int8 score are rows with the same codes and scale, in practice copies of one
    vector (a repeated boilerplate chunk): they add that many rows to re-score."""
    idx = np.flatnonzero(allowed) if allowed is not None else None
    s = scores if idx is None else scores[idx]
    n = len(s)
    if k <= 0 or not n:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(s >= np.partition(s, n - k)[n - k]) if n > k else np.arange(n)
    out: IntArray = (at if idx is None else idx[at]).astype(np.int64, copy=False)
    return out


def top_k_positive(scores: npt.NDArray[np.floating], k: int, allowed: BoolArray | None) -> IntArray:
    """:func:`top_k` less the rows scoring 0 or below, for BM25's scores (finite: a
    NaN has no place in the order), where most rows score 0. The k-th score is found
    on the negated scores: numpy's introselect slows down on a run of equal values on
    the side it selects from, and BM25's zeros are that run at the top end (100k
    rows: 1.8 ms p95 for the k-th score, 0.13 ms negated;
    benchmarks/results/search_core.md, section 14)."""
    idx = np.flatnonzero(allowed) if allowed is not None else None
    s = scores if idx is None else scores[idx]
    n = len(s)
    if k <= 0 or not n:
        return np.zeros(0, dtype=np.int64)
    kth = -np.partition(-s, k - 1)[k - 1] if n > k else 0.0
    return _ranked(s, idx, k, max(kth, 0.0), positive=True)


def _ranked(
    s: npt.NDArray[np.floating],
    idx: IntArray | None,
    k: int,
    kth: float | np.floating | None,
    *,
    positive: bool = False,
) -> IntArray:
    """The ``k`` best rows of ``s`` reaching ``kth`` (``positive``: above 0 when
    ``kth`` is not), best first with ties to the lower position, as positions in
    ``idx`` (the rows themselves when None). ``kth`` None: every row. A stable sort
    of the few rows reaching ``kth`` orders them and cuts the ties at the k-th place
    in one call (each numpy call is several µs when the caches are cold)."""
    if kth is None:
        at = np.arange(len(s), dtype=np.int64)
    else:
        at = np.flatnonzero(s > kth if positive and kth <= 0 else s >= kth)
    at = at[np.argsort(-s[at], kind="stable")[:k]]  # ``at`` ascending: ties by position
    out: IntArray = at if idx is None else idx[at]
    return out


def inverse_norms(vectors: F32Array) -> FloatArray:
    """1 / L2 length of each row (0 for a zero row), accumulated in float64 without
    a float64 copy of the matrix."""
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))
    out: FloatArray = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return out


def quantise(units: F32Array) -> tuple[npt.NDArray[np.int8], F32Array]:
    """Per-row int8 codes of unit rows and each row's step (row ≈ codes × step; a zero
    row gets zero codes and step 0)."""
    peak = np.abs(units).max(axis=1) if units.shape[1] else np.zeros(len(units), np.float32)
    step = (peak / CODE_MAX).astype(np.float32)
    safe = np.where(step > 0, step, 1.0).astype(np.float32)
    codes = np.rint(units / safe[:, None]).clip(-CODE_MAX, CODE_MAX).astype(np.int8)
    return codes, step


def quantise_query(unit: F32Array) -> npt.NDArray[np.int8]:
    """:func:`quantise`'s codes of one row, as a (1, dimension) array, in fewer numpy
    calls (a query is quantised on every search)."""
    peak = np.abs(unit).max() if len(unit) else np.float32(0)
    if not peak > 0:
        return np.zeros((1, len(unit)), np.int8)
    scaled = unit / (peak / np.float32(CODE_MAX))
    np.rint(scaled, out=scaled)
    np.clip(scaled, -CODE_MAX, CODE_MAX, out=scaled)
    return scaled.astype(np.int8)[None, :]


def principal_axes(rows: npt.NDArray[np.floating], dims: int) -> F32Array:
    """The ``dims`` directions of largest variance of ``rows``, as the columns of a
    (dimension, dims) matrix, largest first."""
    x = np.asarray(rows, dtype=np.float64)
    x = x - x.mean(axis=0)
    _, vecs = np.linalg.eigh(x.T @ x)  # ascending eigenvalues
    out: F32Array = np.ascontiguousarray(vecs[:, ::-1][:, :dims], dtype=np.float32)
    return out


@dataclass(frozen=True, slots=True)
class VectorLayout:
    """What an index keeps: float32 rows (exact scores, the stored vectors), int8 codes
    scanned first, how many candidates per wanted row the codes pass on, how many
    threads scan the codes, and how many principal components the codes keep (0: the
    rows themselves; only without float32 rows)."""

    float32: bool
    int8: bool
    rerank: float = 1.5
    threads: int = 1
    dims: int = 0


def layout_for(
    rows: int,
    float32_rows: int,
    int8_rows: int,
    rerank: float,
    threads: int = 1,
    dims: int = 0,
    dims_rerank: int = 20,
) -> VectorLayout:
    """The layout for a table of ``rows``: float32 up to ``float32_rows`` rows, int8
    codes from ``int8_rows`` rows on (always without float32); without float32, codes
    of ``dims`` principal components (0: all dimensions), re-scored ``dims_rerank`` × k."""
    f32 = rows <= float32_rows
    if f32 or not dims:
        return VectorLayout(f32, not f32 or rows >= int8_rows, rerank, threads)
    return VectorLayout(False, True, dims_rerank, threads, dims)


class VectorIndex:
    """The stored vectors (row i = the i-th chunk) in the arrays its layout names, and
    their inverse lengths (0 for a zero vector, which has no cosine)."""

    __slots__ = ("basis", "codes", "inverse_norms", "layout", "matrix", "steps", "units", "valid")

    def __init__(
        self,
        layout: VectorLayout,
        inverse_norms: FloatArray,
        matrix: F32Array | None = None,
        units: npt.NDArray[np.float16] | None = None,
        codes: npt.NDArray[np.int8] | None = None,
        steps: F32Array | None = None,
        basis: F32Array | None = None,
    ) -> None:
        self.layout = layout
        self.basis = basis  # (dimension, layout.dims): what the codes are of
        self.inverse_norms = inverse_norms
        self.matrix = matrix  # float32 stored vectors (layout.float32)
        self.units = units  # float16 unit rows (int8 without float32)
        self.codes = codes
        self.steps = steps
        zero = inverse_norms == 0
        self.valid: BoolArray | None = ~zero if zero.any() else None

    @classmethod
    def empty(cls, dimension: int, layout: VectorLayout | None = None) -> VectorIndex:
        return VectorIndexBuilder(0, dimension, layout or VectorLayout(True, False)).done()

    @classmethod
    def of(cls, matrix: F32Array, layout: VectorLayout | None = None) -> VectorIndex:
        """An index over the rows of ``matrix``."""
        m = np.asarray(matrix, dtype=np.float32)
        builder = VectorIndexBuilder(len(m), m.shape[1], layout or VectorLayout(True, False))
        builder.add(m)
        return builder.done()

    @property
    def rows(self) -> int:
        return int(self.inverse_norms.shape[0])

    @property
    def dimension(self) -> int:
        held = next(a for a in (self.matrix, self.units, self.codes) if a is not None)
        return int(held.shape[1])

    @property
    def nbytes(self) -> int:
        arrays = (
            self.inverse_norms,
            self.matrix,
            self.units,
            self.codes,
            self.steps,
            self.valid,
            self.basis,
        )
        return sum(a.nbytes for a in arrays if a is not None)

    def appended(self, vectors: F32Array) -> VectorIndex:
        """This index plus ``vectors`` (same layout)."""
        v = np.asarray(vectors, dtype=np.float32)
        builder = VectorIndexBuilder(self.rows + len(v), self.dimension, self.layout)
        builder.add_kept(self, np.arange(self.rows))
        builder.add(v)
        return builder.done()

    def kept(self, keep: IntArray) -> VectorIndex:
        """Only the rows at positions ``keep``."""
        if len(keep) == self.rows:
            return self
        builder = VectorIndexBuilder(len(keep), self.dimension, self.layout)
        builder.add_kept(self, keep)
        return builder.done()

    def raw(self, positions: IntArray) -> F32Array:
        """The stored vectors at ``positions`` (float32 layouts only)."""
        if self.matrix is None:
            raise ValueError("this vector index keeps no float32 rows")
        out: F32Array = self.matrix[positions]
        return out

    def search(
        self, query: F32Array, k: int, allowed: BoolArray | None
    ) -> tuple[IntArray, FloatArray]:
        """(positions, cosines) of the ``k`` rows most similar to ``query`` (none for a
        zero query, which has no cosine to anything)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        norm = np.sqrt(q.dot(q))  # np.linalg.norm's float32 value, without its checks
        if norm == 0 or k <= 0 or not self.rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        unit = q / norm
        ok = (
            self.valid
            if allowed is None
            else (allowed if self.valid is None else allowed & self.valid)
        )
        if self.codes is None:
            sims = self._exact(unit, None)
            rows = top_k(sims, k, ok)
            return rows, sims[rows]
        depth = math.ceil(k * self.layout.rerank)
        candidates = reaching_kth(self._approx(unit), depth, ok)
        sims = self._exact(unit, candidates)
        # top_k(sims, k, None): candidates are ascending, so a stable sort ties by row
        best = np.argsort(-sims, kind="stable")[:k]
        return candidates[best], sims[best]

    def _approx(self, unit: F32Array) -> F32Array:
        """Every row's approximate cosine, up to the query's constant scale."""
        assert self.codes is not None and self.steps is not None
        if self.basis is not None:  # a product this small stays off BLAS (thread limits)
            unit = np.einsum("i,ij->j", unit, self.basis)
        q8 = quantise_query(unit)
        threads = self.layout.threads
        dots = simsimd.cdist(q8, self.codes, metric="dot", out_dtype="float32", threads=threads)
        approx: F32Array = np.asarray(dots).reshape(-1)
        approx *= self.steps
        return approx

    def _exact(self, unit: F32Array, at: IntArray | None) -> FloatArray:
        """Exact cosines of the rows ``at`` (all when None) to the unit query."""
        inv = self.inverse_norms if at is None else self.inverse_norms[at]
        if self.matrix is not None and at is not None:
            # a few hundred rows: einsum, no BLAS (whose thread limit costs ≈ 0.1 ms to set)
            part: FloatArray = np.einsum("ij,j->i", self.matrix[at], unit) * inv
            return part
        if self.matrix is not None:
            # One BLAS thread: a threaded matrix-vector product spin-waits for cores that
            # concurrent searches (and other processes) hold; on 2 busy cores it took
            # 35 ms p95 instead of 7 ms for 9k × 384 (benchmarks/results/profile.md).
            with _blas().limit(limits=1, user_api="blas"):
                sims: FloatArray = (self.matrix @ unit) * inv
            return sims
        assert self.units is not None and at is not None
        if not len(at):  # every row masked out
            return np.zeros(0)
        # float16 SIMD dot products: 4,000 rows in 0.45 ms, against 7 ms for a float32
        # copy + einsum (the principal-component layout re-scores that many)
        q16 = unit.astype(np.float16)[None, :]
        dots = simsimd.cdist(q16, self.units[at], metric="dot", out_dtype="float32")
        cos: FloatArray = np.asarray(dots, dtype=np.float64).reshape(-1)
        cos[inv == 0] = 0.0
        return cos


class VectorIndexBuilder:
    """Fills a :class:`VectorIndex`'s arrays in place, batch by batch: memory holds the
    final arrays and one batch, never a concatenated copy."""

    def __init__(self, rows: int, dimension: int, layout: VectorLayout) -> None:
        if layout.dims and layout.float32:
            raise ValueError("codes of principal components need the float16 rows")
        self.layout = layout
        self.filled = 0
        self.inverse_norms = np.zeros(rows)
        self.matrix = np.empty((rows, dimension), np.float32) if layout.float32 else None
        self.units = None if layout.float32 else np.empty((rows, dimension), np.float16)
        width = min(layout.dims, dimension) if layout.dims else dimension
        self.codes = np.empty((rows, width), np.int8) if layout.int8 else None
        self.steps = np.empty(rows, np.float32) if layout.int8 else None
        self.basis: F32Array | None = None
        self.uncoded = 0  # rows before this one have their codes (a basis waits for all)

    def add_kept(self, old: VectorIndex, keep: IntArray) -> None:
        """The rows of ``old`` (same layout) at positions ``keep``."""
        if old.layout != self.layout:
            raise ValueError("a vector index can only keep rows of its own layout")
        if self.basis is None and old.basis is not None:
            self.basis = old.basis
        self._code_projected()  # rows added before (none when a refresh builds)
        a, b = self.filled, self.filled + len(keep)
        np.take(old.inverse_norms, keep, out=self.inverse_norms[a:b])
        for mine, theirs in ((self.matrix, old.matrix), (self.units, old.units)):
            if mine is not None and theirs is not None:
                np.take(theirs, keep, axis=0, out=mine[a:b])
        if self.codes is not None and self.steps is not None:
            assert old.codes is not None and old.steps is not None
            np.take(old.codes, keep, axis=0, out=self.codes[a:b])
            np.take(old.steps, keep, out=self.steps[a:b])
        self.filled = self.uncoded = b

    def add(self, vectors: F32Array) -> None:
        """New rows (stored vectors, any length)."""
        v = np.asarray(vectors, dtype=np.float32)
        a, b = self.filled, self.filled + len(v)
        inv = inverse_norms(v)
        self.inverse_norms[a:b] = inv
        if self.matrix is not None:
            self.matrix[a:b] = v
        if self.units is not None or self.codes is not None:
            units = (v * inv[:, None]).astype(np.float32)
            if self.units is not None:
                self.units[a:b] = units
            if self.codes is not None and self.steps is not None and not self.layout.dims:
                self.codes[a:b], self.steps[a:b] = quantise(units)
        self.filled = b
        if not self.layout.dims:
            self.uncoded = b

    def _code_projected(self) -> None:
        """Codes of the rows added since the last ones coded, on the kept basis or on
        one estimated from an even sample of every row now held."""
        n = self.filled
        if self.uncoded >= n or self.codes is None or self.steps is None:
            return
        assert self.units is not None
        if self.basis is None:
            sample = np.linspace(0, n - 1, min(n, BASIS_SAMPLE)).astype(np.int64)
            self.basis = principal_axes(self.units[sample], self.codes.shape[1])
        for a in range(self.uncoded, n, PROJECT_BLOCK):
            b = min(a + PROJECT_BLOCK, n)
            with _blas().limit(limits=1, user_api="blas"):
                projected = self.units[a:b].astype(np.float32) @ self.basis
            self.codes[a:b], self.steps[a:b] = quantise(projected)
        self.uncoded = n

    def done(self) -> VectorIndex:
        self._code_projected()
        n = self.filled

        def cut(a: npt.NDArray[np.generic] | None) -> npt.NDArray[np.generic] | None:
            return a if a is None or len(a) == n else a[:n]

        return VectorIndex(
            self.layout,
            self.inverse_norms[:n],
            cut(self.matrix),  # type: ignore[arg-type]
            cut(self.units),  # type: ignore[arg-type]
            cut(self.codes),  # type: ignore[arg-type]
            cut(self.steps),  # type: ignore[arg-type]
            self.basis,
        )
