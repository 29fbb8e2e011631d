"""Merge ranked lists of hits from several retrievers into one ranking.

The functions are pure and work on ids and scores (:class:`~ragline.types.Scored` in,
:class:`~ragline.types.Fused` out), so retrieval fuses candidates before any chunk is loaded;
``reciprocal_rank_fusion`` and ``weighted_fusion`` do the same on lists of
:class:`~ragline.types.Hit` (inputs never mutated). An entry keeps the first
``vector_score`` / ``keyword_score`` any list gave it, so later stages (threshold,
rerank, display) still see each retriever's own score.

Ties are broken deterministically: higher fused score first, then the higher
relative strength (the sum over lists of score / top score of that list, so of
two chunks at ranks 1 and 2 in swapped lists the one that came closer to the
other list's winner goes first), then the better best single-list rank, then
the chunk id.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from ragline.types import Fused, Hit, Scored

Normalisation = Literal["minmax", "none"]


@dataclass(slots=True)
class _Entry:
    """An entry being merged: scores gathered so far, best rank."""

    score: float
    best_rank: int
    vector_score: float | None
    keyword_score: float | None
    strength: float = 0.0


def _check_weight(name: str, w: float) -> None:
    if not math.isfinite(w) or w < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {w!r}")


def _absorb(
    entries: dict[str, _Entry], item: Scored, rank: int, contribution: float, strength: float = 0.0
) -> None:
    """Add one list's contribution for ``item`` (found at 1-based ``rank``)."""
    entry = entries.get(item.id)
    if entry is None:
        entries[item.id] = _Entry(
            contribution, rank, item.vector_score, item.keyword_score, strength
        )
        return
    entry.score += contribution
    entry.strength += strength
    entry.best_rank = min(entry.best_rank, rank)
    if entry.vector_score is None:
        entry.vector_score = item.vector_score
    if entry.keyword_score is None:
        entry.keyword_score = item.keyword_score


def _ranked(entries: dict[str, _Entry]) -> list[Fused]:
    """Entries ordered by fused score (ties: strength, best single rank, id), ranks 1..n."""
    ordered = sorted(
        entries.items(), key=lambda kv: (-kv[1].score, -kv[1].strength, kv[1].best_rank, kv[0])
    )
    return [
        Fused(cid, e.score, i, e.vector_score, e.keyword_score)
        for i, (cid, e) in enumerate(ordered, start=1)
    ]


def rrf_scored(
    ranked_lists: Sequence[Sequence[Scored]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[Fused]:
    """Reciprocal rank fusion: ``score(d) = Σ_i w_i / (k + rank_i(d))``, ranks 1-based.

    RRF uses only positions, so lists whose scores live on different scales (BM25,
    cosine) merge without calibration. An id listed twice in one list counts once,
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
    for items, w in zip(ranked_lists, weights, strict=True):
        seen: set[str] = set()
        top = max((x.score for x in items if math.isfinite(x.score)), default=0.0)
        for rank, item in enumerate(items, start=1):
            if item.id in seen:
                continue
            seen.add(item.id)
            strength = item.score / top if top > 0 and math.isfinite(item.score) else 0.0
            _absorb(entries, item, rank, w / (k + rank), strength)
    return _ranked(entries)


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


def weighted_scored(
    vector: Sequence[Scored],
    keyword: Sequence[Scored],
    vector_weight: float = 0.4,
    keyword_weight: float = 0.6,
    normalise: Normalisation = "minmax",
) -> list[Fused]:
    """Weighted sum of per-list normalised scores (an id missing from a list gets 0).

    Each list is scored by its ``score``. ``normalise="minmax"`` rescales each list
    to [0, 1] first, because BM25 scores are unbounded while cosines are not;
    ``"none"`` uses the raw scores (for lists already on one scale).
    """
    _check_weight("vector_weight", vector_weight)
    _check_weight("keyword_weight", keyword_weight)
    if normalise not in ("minmax", "none"):
        raise ValueError(f"normalise must be 'minmax' or 'none', got {normalise!r}")

    entries: dict[str, _Entry] = {}
    for items, weight, name in (
        (vector, vector_weight, "vector_hits"),
        (keyword, keyword_weight, "keyword_hits"),
    ):
        raw: dict[str, float] = {}
        for item in items:
            if item.id not in raw:
                if not math.isfinite(item.score):
                    raise ValueError(
                        f"{name}: hit {item.id!r} has a non-finite score {item.score!r}"
                    )
                raw[item.id] = item.score
        norm = _minmax(raw) if normalise == "minmax" else raw
        seen: set[str] = set()
        for rank, item in enumerate(items, start=1):
            if item.id in seen:
                continue
            seen.add(item.id)
            _absorb(entries, item, rank, weight * norm[item.id])
    return _ranked(entries)


def weighted_pairs(
    vector: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    vector_weight: float = 0.4,
    keyword_weight: float = 0.6,
    limit: int | None = None,
) -> list[Fused]:
    """:func:`weighted_scored` (min-max) on (id, score) pairs, the first ``limit`` of
    the ranking only (all when None): the same scores, order and ranks, without an
    object per candidate, since a search fuses 2 × 200 candidates to keep 10
    (0.7 ms → benchmarks/results/search_core.md, section 5)."""
    _check_weight("vector_weight", vector_weight)
    _check_weight("keyword_weight", keyword_weight)
    raw_v = _first_scores(vector, "vector_hits")
    raw_k = _first_scores(keyword, "keyword_hits")
    fused: dict[str, float] = {}
    best: dict[str, int] = {}
    for pairs, raw, weight in ((vector, raw_v, vector_weight), (keyword, raw_k, keyword_weight)):
        norm = _minmax(raw)
        seen: set[str] = set()
        for rank, (cid, _) in enumerate(pairs, start=1):
            if cid in seen:
                continue
            seen.add(cid)
            part = weight * norm[cid]
            fused[cid] = fused[cid] + part if cid in fused else part
            if rank < best.get(cid, rank + 1):
                best[cid] = rank

    keys = [(-score, best[cid], cid) for cid, score in fused.items()]
    if limit is not None and limit < len(keys):
        keys = heapq.nsmallest(max(limit, 0), keys)
    else:
        keys.sort()
    return [
        Fused(cid, fused[cid], r, raw_v.get(cid), raw_k.get(cid))
        for r, (_, _, cid) in enumerate(keys, start=1)
    ]


def weighted_positions(
    vector: tuple[npt.NDArray[np.integer], npt.NDArray[np.floating]],
    keyword: tuple[npt.NDArray[np.integer], npt.NDArray[np.floating]],
    ids: npt.NDArray[np.object_],
    vector_weight: float = 0.4,
    keyword_weight: float = 0.6,
    limit: int | None = None,
) -> list[Fused]:
    """:func:`weighted_pairs` on candidates known by row position (``(positions,
    scores)`` per list, best first; ``ids[position]`` is the chunk id), in numpy:
    ids are looked up for the returned head only. The same float64 operations as
    :func:`weighted_pairs`, so scores, order and ranks are identical (ties: fused
    score, best single-list rank, id); 2 × 200 candidates fuse several times faster
    (benchmarks/results/search_fixed_cost.md). Both lists live in one array from
    the start: every numpy call costs microseconds when another search's work has
    left the caches cold, so there are as few as the fusion needs."""
    _check_weight("vector_weight", vector_weight)
    _check_weight("keyword_weight", keyword_weight)
    vpos = np.asarray(vector[0], dtype=np.int64)
    kpos = np.asarray(keyword[0], dtype=np.int64)
    raw = np.concatenate([vector[1], keyword[1]]).astype(np.float64, copy=False)
    nv = len(vpos)
    pos = np.concatenate([vpos, kpos])
    rank = np.concatenate([_ranks(nv), _ranks(len(kpos))])
    pairs = _shared(pos, nv)
    if pairs is None:  # an id listed twice in one list counts once, at its first place
        first = np.concatenate([_firsts(vpos), nv + _firsts(kpos)])
        nv = int(np.count_nonzero(first < nv))
        pos, raw, rank = pos[first], raw[first], rank[first]
        pairs = _shared(pos, nv)
        assert pairs is not None
    if not np.isfinite(raw).all():  # first places only, as weighted_pairs checks
        bad = int(np.flatnonzero(~np.isfinite(raw))[0])
        name = "vector_hits" if bad < nv else "keyword_hits"
        raise ValueError(
            f"{name}: hit {ids[pos[bad]]!r} has a non-finite score {float(raw[bad])!r}"
        )
    part = np.concatenate(
        [vector_weight * _minmax_array(raw[:nv]), keyword_weight * _minmax_array(raw[nv:])]
    )
    i, j = pairs  # entry i (vector list) and entry j (keyword list) are one chunk
    part[i] = part[i] + part[j]  # vector part + keyword part, as weighted_pairs adds them
    rank[i] = np.minimum(rank[i], rank[j])
    keep = np.ones(len(part), dtype=bool)
    keep[j] = False
    entry = np.flatnonzero(keep)
    entry = entry[np.lexsort((rank[entry], -part[entry]))]
    if limit is not None and limit < len(entry):
        cut = max(limit, 0)
        if cut:  # entries tied with the last kept one on (score, rank) may outrank it by id
            last = entry[cut - 1]
            while cut < len(entry) and (
                part[entry[cut]] == part[last] and rank[entry[cut]] == rank[last]
            ):
                cut += 1
        entry = entry[:cut]
    head = entry.tolist()
    keys = sorted(
        zip(
            (-part[entry]).tolist(),
            rank[entry].tolist(),
            ids[pos[entry]].tolist(),
            head,
            strict=True,
        )
    )
    if limit is not None:
        keys = keys[: max(limit, 0)]
    # each entry's own list scores: a vector entry's keyword score is its partner's
    partner = dict(zip(i.tolist(), j.tolist(), strict=True))
    scores = raw.tolist()
    out = []
    for r, (neg, _, cid, e) in enumerate(keys, start=1):
        if e < nv:
            other = partner.get(e)
            own_v, own_k = scores[e], None if other is None else scores[other]
        else:
            own_v, own_k = None, scores[e]
        out.append(Fused(cid, -neg, r, own_v, own_k))
    return out


#: 1, 2, 3, …: a list's ranks, sliced from here rather than made on every search.
_RANK_RUN = np.arange(1, 1025, dtype=np.int64)
_RANK_RUN.setflags(write=False)


def _ranks(n: int) -> npt.NDArray[np.int64]:
    """1 … ``n`` (a view of :data:`_RANK_RUN` when it is long enough)."""
    return _RANK_RUN[:n] if n <= len(_RANK_RUN) else np.arange(1, n + 1, dtype=np.int64)


def _shared(
    pos: npt.NDArray[np.int64], nv: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(vector entries, keyword entries) at the same position, as indexes into
    ``pos`` (the vector list's ``nv`` positions, then the keyword list's); None when
    a list repeats a position."""
    order = np.argsort(pos, kind="stable")
    same = np.flatnonzero(pos[order[1:]] == pos[order[:-1]])
    first, second = order[same], order[same + 1]
    if ((first >= nv) | (second < nv)).any():
        return None
    return first, second


def _firsts(pos: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Indexes of each position's first entry, in list order."""
    _, first = np.unique(pos, return_index=True)
    first.sort()
    return first


def _minmax_array(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """:func:`_minmax` on an array (the same float64 operations)."""
    if not len(scores):
        return scores
    lo, hi = scores.min(), scores.max()
    if hi == lo:
        return np.ones_like(scores)
    out: npt.NDArray[np.float64] = (scores - lo) / (hi - lo)
    return out


def _first_scores(pairs: Sequence[tuple[str, float]], name: str) -> dict[str, float]:
    """Each id's first score, in list order (finite, or a ValueError naming ``name``)."""
    out: dict[str, float] = {}
    for cid, score in pairs:
        if cid not in out:
            if not math.isfinite(score):
                raise ValueError(f"{name}: hit {cid!r} has a non-finite score {score!r}")
            out[cid] = score
    return out


# ------------------------------------------------------------- on Hit lists


def _scored(hits: Sequence[Hit], attr: str | None) -> list[Scored]:
    """Hits as :class:`Scored` entries ranked by ``attr`` (falling back to ``score``)."""
    out = []
    for h in hits:
        value = getattr(h, attr) if attr else None
        score = float(h.score if value is None else value)
        out.append(Scored(h.chunk.id, score, h.vector_score, h.keyword_score))
    return out


def _as_hits(fused: list[Fused], lists: Sequence[Sequence[Hit]]) -> list[Hit]:
    """Fused entries as new hits, each a copy of the first hit seen with its id."""
    first: dict[str, Hit] = {}
    for hits in lists:
        for h in hits:
            first.setdefault(h.chunk.id, h)
    return [
        replace(
            first[f.id],
            score=f.score,
            rank=f.rank,
            vector_score=f.vector_score,
            keyword_score=f.keyword_score,
        )
        for f in fused
    ]


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[Hit]],
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[Hit]:
    """:func:`rrf_scored` on lists of hits (identified by ``hit.chunk.id``, ranked by
    ``hit.score``); returns new hits, inputs untouched."""
    fused = rrf_scored([_scored(hits, None) for hits in ranked_lists], k, weights)
    return _as_hits(fused, ranked_lists)


def weighted_fusion(
    vector_hits: Sequence[Hit],
    keyword_hits: Sequence[Hit],
    vector_weight: float = 0.4,
    keyword_weight: float = 0.6,
    normalise: Normalisation = "minmax",
) -> list[Hit]:
    """:func:`weighted_scored` on lists of hits: vector hits are scored by
    ``vector_score`` and keyword hits by ``keyword_score`` (each falling back to
    ``hit.score``); returns new hits, inputs untouched."""
    fused = weighted_scored(
        _scored(vector_hits, "vector_score"),
        _scored(keyword_hits, "keyword_score"),
        vector_weight,
        keyword_weight,
        normalise,
    )
    return _as_hits(fused, [vector_hits, keyword_hits])
