"""Merge ranked lists of hits from several retrievers into one ranking.

Both functions are pure: they take ranked lists, return a new ranked list of new
:class:`~ragline.types.Hit` objects (inputs are never mutated) and do not know which
store produced the lists. Hits are identified by ``hit.chunk.id``; the merged hit
keeps the first ``vector_score`` / ``keyword_score`` any list gave it, so later
stages (threshold, rerank, display) still see each retriever's own score.

Ties are broken deterministically: higher fused score first, then the higher
relative strength (the sum over lists of score / top score of that list, so of
two chunks at ranks 1 and 2 in swapped lists the one that came closer to the
other list's winner goes first), then the better best single-list rank, then
the chunk id.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ragline.types import Hit

Normalisation = Literal["minmax", "none"]


@dataclass(slots=True)
class _Entry:
    """A hit being merged: the first copy seen, scores gathered so far, best rank."""

    hit: Hit
    score: float
    best_rank: int
    vector_score: float | None
    keyword_score: float | None
    strength: float = 0.0


def _check_weight(name: str, w: float) -> None:
    if not math.isfinite(w) or w < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {w!r}")


def _absorb(
    entries: dict[str, _Entry], hit: Hit, rank: int, contribution: float, strength: float = 0.0
) -> None:
    """Add one list's contribution for ``hit`` (found at 1-based ``rank``)."""
    entry = entries.get(hit.chunk.id)
    if entry is None:
        entries[hit.chunk.id] = _Entry(
            hit=hit,
            score=contribution,
            best_rank=rank,
            vector_score=hit.vector_score,
            keyword_score=hit.keyword_score,
            strength=strength,
        )
        return
    entry.score += contribution
    entry.strength += strength
    entry.best_rank = min(entry.best_rank, rank)
    if entry.vector_score is None:
        entry.vector_score = hit.vector_score
    if entry.keyword_score is None:
        entry.keyword_score = hit.keyword_score


def _ranked(entries: dict[str, _Entry]) -> list[Hit]:
    """New hits ordered by fused score (ties: strength, best single rank, id), ranks 1..n."""
    ordered = sorted(
        entries.values(), key=lambda e: (-e.score, -e.strength, e.best_rank, e.hit.chunk.id)
    )
    return [
        replace(
            e.hit,
            score=e.score,
            rank=i,
            vector_score=e.vector_score,
            keyword_score=e.keyword_score,
        )
        for i, e in enumerate(ordered, start=1)
    ]


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Hit]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """Reciprocal rank fusion: ``score(d) = Σ_i w_i / (k + rank_i(d))``, ranks 1-based.

    RRF uses only positions, so lists whose scores live on different scales (BM25,
    cosine) merge without calibration. A chunk listed twice in one list counts once,
    at its better position. ``weights`` (one per list, default all 1) tilt the merge
    toward a retriever without touching its scores.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    elif len(weights) != len(ranked_lists):
        raise ValueError(
            f"weights has {len(weights)} entries but there are {len(ranked_lists)} ranked lists"
        )
    for i, w in enumerate(weights):
        _check_weight(f"weights[{i}]", w)

    entries: dict[str, _Entry] = {}
    for hits, w in zip(ranked_lists, weights, strict=True):
        seen: set[str] = set()
        top = max((h.score for h in hits if math.isfinite(h.score)), default=0.0)
        for rank, hit in enumerate(hits, start=1):
            if hit.chunk.id in seen:
                continue
            seen.add(hit.chunk.id)
            strength = hit.score / top if top > 0 and math.isfinite(hit.score) else 0.0
            _absorb(entries, hit, rank, w / (k + rank), strength)
    return _ranked(entries)


def _source_scores(hits: Sequence[Hit], attr: str, list_name: str) -> dict[str, float]:
    """First score per chunk id from one list (``attr`` if set, else ``hit.score``)."""
    scores: dict[str, float] = {}
    for hit in hits:
        if hit.chunk.id in scores:
            continue
        value = getattr(hit, attr)
        s = float(hit.score if value is None else value)
        if not math.isfinite(s):
            raise ValueError(f"{list_name}: hit {hit.chunk.id!r} has a non-finite score {s!r}")
        scores[hit.chunk.id] = s
    return scores


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    """Scale to [0, 1]; a single score or all-equal scores map to 1.0 (a list's best
    hit is always worth its full weight, whatever the raw scale)."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi == lo:
        return dict.fromkeys(scores, 1.0)
    span = hi - lo
    return {cid: (s - lo) / span for cid, s in scores.items()}


def weighted_fusion(
    vector_hits: Sequence[Hit],
    keyword_hits: Sequence[Hit],
    vector_weight: float = 0.4,
    keyword_weight: float = 0.6,
    normalise: Normalisation = "minmax",
) -> list[Hit]:
    """Weighted sum of per-list normalised scores (a chunk missing from a list gets 0).

    Vector hits are scored by ``vector_score`` and keyword hits by ``keyword_score``
    (each falling back to ``hit.score``). ``normalise="minmax"`` rescales each list
    to [0, 1] first, because BM25 scores are unbounded while cosines are not;
    ``"none"`` uses the raw scores (for lists already on one scale).
    """
    _check_weight("vector_weight", vector_weight)
    _check_weight("keyword_weight", keyword_weight)
    if normalise not in ("minmax", "none"):
        raise ValueError(f"normalise must be 'minmax' or 'none', got {normalise!r}")

    entries: dict[str, _Entry] = {}
    for hits, attr, weight, name in (
        (vector_hits, "vector_score", vector_weight, "vector_hits"),
        (keyword_hits, "keyword_score", keyword_weight, "keyword_hits"),
    ):
        raw = _source_scores(hits, attr, name)
        norm = _minmax(raw) if normalise == "minmax" else raw
        seen: set[str] = set()
        for rank, hit in enumerate(hits, start=1):
            if hit.chunk.id in seen:
                continue
            seen.add(hit.chunk.id)
            _absorb(entries, hit, rank, weight * norm[hit.chunk.id])
    return _ranked(entries)
