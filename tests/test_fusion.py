"""Fusion: hand-computed RRF sums and weighted scores, ties, empty lists, weights."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from tests.retrieve.conftest import build_chunk

from ragline.fusion import (
    reciprocal_rank_fusion,
    weighted_fusion,
    weighted_pairs,
    weighted_positions,
    weighted_scored,
)
from ragline.types import Hit, Scored

HitFactory = Callable[..., Hit]


@pytest.fixture(scope="module")
def make_hit() -> HitFactory:
    def _hit(cid: str, score: float = 0.0, **kw: Any) -> Hit:
        chunk_kw = {k: kw.pop(k) for k in list(kw) if k not in Hit.__dataclass_fields__}
        return Hit(chunk=build_chunk(cid, **chunk_kw), score=score, **kw)

    return _hit


def ids(hits: list[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


# --- reciprocal rank fusion ------------------------------------------------------


def test_rrf_exact_sums_and_ranks(make_hit: HitFactory) -> None:
    vec = [make_hit("a", vector_score=0.9), make_hit("b", vector_score=0.8)]
    kw = [make_hit("b", keyword_score=7.0), make_hit("c", keyword_score=3.0)]
    out = reciprocal_rank_fusion([vec, kw], k=60)
    assert ids(out) == ["b", "a", "c"]
    assert out[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert out[1].score == pytest.approx(1 / 61)
    assert out[2].score == pytest.approx(1 / 62)
    assert [h.rank for h in out] == [1, 2, 3]


def test_rrf_keeps_each_lists_own_score(make_hit: HitFactory) -> None:
    vec = [make_hit("a", vector_score=0.9), make_hit("b", vector_score=0.8)]
    kw = [make_hit("b", keyword_score=7.0), make_hit("c", keyword_score=3.0)]
    by_id = {h.chunk.id: h for h in reciprocal_rank_fusion([vec, kw])}
    assert (by_id["b"].vector_score, by_id["b"].keyword_score) == (0.8, 7.0)
    assert (by_id["a"].vector_score, by_id["a"].keyword_score) == (0.9, None)
    assert (by_id["c"].vector_score, by_id["c"].keyword_score) == (None, 3.0)


def test_rrf_does_not_mutate_inputs(make_hit: HitFactory) -> None:
    a = make_hit("a", score=0.5, rank=7, vector_score=0.5)
    out = reciprocal_rank_fusion([[a], [make_hit("a", keyword_score=2.0)]])
    assert (a.score, a.rank, a.keyword_score) == (0.5, 7, None)
    assert out[0] is not a
    assert out[0].chunk is a.chunk


def test_rrf_small_k_changes_the_winner(make_hit: HitFactory) -> None:
    # x: ranks 1 and 10; y: ranks 3 and 3. k=0 favours the single top rank, k=60 consensus.
    fillers = [make_hit(f"f{i}") for i in range(10)]
    list1 = [make_hit("x"), fillers[0], make_hit("y"), *fillers[1:8]]
    list2 = [fillers[8], fillers[9], make_hit("y"), *fillers[1:7], make_hit("x")]
    assert len(list2) == 10 and ids(list2)[9] == "x"
    k0 = {h.chunk.id: h.score for h in reciprocal_rank_fusion([list1, list2], k=0)}
    assert k0["x"] == pytest.approx(1 / 1 + 1 / 10)
    assert k0["y"] == pytest.approx(1 / 3 + 1 / 3)
    assert k0["x"] > k0["y"]
    k60 = {h.chunk.id: h.score for h in reciprocal_rank_fusion([list1, list2], k=60)}
    assert k60["x"] == pytest.approx(1 / 61 + 1 / 70)
    assert k60["y"] == pytest.approx(2 / 63)
    assert k60["y"] > k60["x"]


def test_rrf_weights(make_hit: HitFactory) -> None:
    l1 = [make_hit("a"), make_hit("b")]
    l2 = [make_hit("b"), make_hit("a")]
    plain = reciprocal_rank_fusion([l1, l2], k=1)
    assert plain[0].score == pytest.approx(plain[1].score)
    out = reciprocal_rank_fusion([l1, l2], k=1, weights=[1.0, 3.0])
    assert ids(out) == ["b", "a"]
    assert out[0].score == pytest.approx(1 / 3 + 3 / 2)
    assert out[1].score == pytest.approx(1 / 2 + 3 / 3)
    zero = reciprocal_rank_fusion([l1, l2], k=1, weights=[0.0, 1.0])
    assert ids(zero) == ["b", "a"]
    assert zero[0].score == pytest.approx(1 / 2)


def test_rrf_tie_broken_by_best_rank_then_id(make_hit: HitFactory) -> None:
    # Same score, same best rank → chunk id decides.
    out = reciprocal_rank_fusion([[make_hit("q")], [make_hit("p")]])
    assert ids(out) == ["p", "q"]
    # Same score, different best rank (weights make it exact: m = 1/1, n = 2 * 1/2).
    l1 = [make_hit("m"), make_hit("z")]
    l2 = [make_hit("y"), make_hit("n")]
    out = reciprocal_rank_fusion([l1, l2], k=0, weights=[1.0, 2.0])
    scores = {h.chunk.id: h.score for h in out}
    assert scores["m"] == scores["n"] == 1.0
    assert ids(out)[:4] == ["y", "m", "n", "z"]  # y = 2.0; m (best rank 1) before n (2)


def test_rrf_does_not_depend_on_list_order(make_hit: HitFactory) -> None:
    l1 = [make_hit(c) for c in "cabd"]
    l2 = [make_hit(c) for c in "bcae"]
    first = reciprocal_rank_fusion([l1, l2])
    swapped = reciprocal_rank_fusion([l2, l1])
    assert ids(first) == ids(swapped) == ["c", "b", "a", "d", "e"]
    assert [h.score for h in first] == [h.score for h in swapped]


def test_rrf_duplicate_in_one_list_counts_once_at_best_rank(make_hit: HitFactory) -> None:
    out = reciprocal_rank_fusion([[make_hit("a"), make_hit("b"), make_hit("a")]], k=60)
    assert ids(out) == ["a", "b"]
    assert out[0].score == pytest.approx(1 / 61)
    assert out[1].score == pytest.approx(1 / 62)


def test_rrf_empty_inputs(make_hit: HitFactory) -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    out = reciprocal_rank_fusion([[], [make_hit("a"), make_hit("b")]])
    assert ids(out) == ["a", "b"]
    assert out[0].score == pytest.approx(1 / 61)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": -1}, "k must be >= 0"),
        ({"weights": [1.0]}, "weights has 1 entries but there are 2"),
        ({"weights": [1.0, -0.5]}, r"weights\[1\] must be a finite number"),
        ({"weights": [math.nan, 1.0]}, r"weights\[0\] must be a finite number"),
    ],
)
def test_rrf_rejects_bad_arguments(
    make_hit: HitFactory, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        reciprocal_rank_fusion([[make_hit("a")], [make_hit("b")]], **kwargs)  # type: ignore[arg-type]


# --- weighted fusion ---------------------------------------------------------------


def test_weighted_hand_computed(make_hit: HitFactory) -> None:
    vec = [
        make_hit("a", vector_score=0.9),
        make_hit("b", vector_score=0.7),
        make_hit("c", vector_score=0.5),
    ]
    kw = [make_hit("c", keyword_score=12.0), make_hit("d", keyword_score=4.0)]
    out = weighted_fusion(vec, kw, vector_weight=0.4, keyword_weight=0.6)
    # vector minmax: a=1, b=0.5, c=0; keyword minmax: c=1, d=0.
    expected = {"a": 0.4, "b": 0.2, "c": 0.6, "d": 0.0}
    assert ids(out) == ["c", "a", "b", "d"]
    for h in out:
        assert h.score == pytest.approx(expected[h.chunk.id])
    assert [h.rank for h in out] == [1, 2, 3, 4]
    c = out[0]
    assert (c.vector_score, c.keyword_score) == (0.5, 12.0)


def test_weighted_single_or_equal_scores_normalise_to_one(make_hit: HitFactory) -> None:
    vec = [make_hit("a", vector_score=0.3)]
    kw = [make_hit("b", keyword_score=5.0), make_hit("c", keyword_score=5.0)]
    out = {h.chunk.id: h.score for h in weighted_fusion(vec, kw, 0.4, 0.6)}
    assert out == pytest.approx({"a": 0.4, "b": 0.6, "c": 0.6})


def test_weighted_one_empty_list(make_hit: HitFactory) -> None:
    kw = [make_hit("b", keyword_score=8.0), make_hit("c", keyword_score=2.0)]
    out = weighted_fusion([], kw)
    assert ids(out) == ["b", "c"]
    assert [h.score for h in out] == pytest.approx([0.6, 0.0])
    assert weighted_fusion([], []) == []


def test_weighted_tie_broken_by_best_rank_then_id(make_hit: HitFactory) -> None:
    vec = [make_hit("v1", vector_score=0.9), make_hit("v2", vector_score=0.1)]
    kw = [make_hit("k1", keyword_score=3.0), make_hit("k2", keyword_score=1.0)]
    out = weighted_fusion(vec, kw, vector_weight=0.5, keyword_weight=0.5)
    # v1 and k1 both 0.5 at rank 1 → id order; v2 and k2 both 0 at rank 2 → id order.
    assert ids(out) == ["k1", "v1", "k2", "v2"]


def test_weighted_falls_back_to_score_and_raw_mode(make_hit: HitFactory) -> None:
    vec = [make_hit("a", score=0.8), make_hit("b", score=0.2)]
    kw = [make_hit("b", score=0.9)]
    raw = {h.chunk.id: h.score for h in weighted_fusion(vec, kw, 1.0, 1.0, normalise="none")}
    assert raw == pytest.approx({"a": 0.8, "b": 1.1})
    mm = {h.chunk.id: h.score for h in weighted_fusion(vec, kw, 1.0, 1.0)}
    assert mm == pytest.approx({"a": 1.0, "b": 1.0})


def test_weighted_rejects_bad_input(make_hit: HitFactory) -> None:
    with pytest.raises(ValueError, match="vector_weight must be a finite number"):
        weighted_fusion([], [], vector_weight=-1.0)
    with pytest.raises(ValueError, match="normalise must be"):
        weighted_fusion([], [], normalise="zscore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keyword_hits: hit 'x' has a non-finite score"):
        weighted_fusion([], [make_hit("x", keyword_score=math.inf)])


def test_rrf_tie_goes_to_the_relatively_stronger_hit(make_hit: Any) -> None:
    # a and b sit at ranks 1 and 2 in swapped lists: equal RRF scores. b came much
    # closer to a in the keyword list (9.9 vs 10) than a came to b in the vector list.
    vector = [make_hit("a", score=0.60), make_hit("b", score=0.59)]
    keyword = [make_hit("b", score=10.0), make_hit("a", score=3.0)]
    fused = reciprocal_rank_fusion([vector, keyword], k=60)
    assert fused[0].score == pytest.approx(fused[1].score)
    assert [h.chunk.id for h in fused] == ["b", "a"]


@pytest.mark.parametrize("limit", [None, 0, 1, 10, 500])
def test_weighted_pairs_is_weighted_scored_on_pairs(limit: int | None) -> None:
    """The pair-based fast path ranks, scores and ranks-numbers exactly like
    weighted_scored, ties and duplicate ids included, cut to ``limit``."""
    rng = random.Random(3)
    for trial in range(30):
        ids = [f"c{i}" for i in range(60)]
        vector = [(rng.choice(ids), round(rng.uniform(0, 1), 1)) for _ in range(40)]
        keyword = [(rng.choice(ids), float(rng.randint(0, 5))) for _ in range(40)]
        if trial == 0:
            vector = []
        vs = [Scored(i, s, vector_score=s) for i, s in vector]
        ks = [Scored(i, s, keyword_score=s) for i, s in keyword]
        want = weighted_scored(vs, ks, 0.4, 0.6)
        got = weighted_pairs(vector, keyword, 0.4, 0.6, limit)
        assert got == want[: len(want) if limit is None else limit]


def test_weighted_pairs_rejects_non_finite_scores() -> None:
    with pytest.raises(ValueError, match="keyword_hits: hit 'b'"):
        weighted_pairs([("a", 0.5)], [("b", math.nan)])


@pytest.mark.parametrize("limit", [None, 0, 1, 3, 10, 500])
@pytest.mark.parametrize("unique", [True, False])
def test_weighted_positions_is_weighted_pairs_on_positions(limit: int | None, unique: bool) -> None:
    """The positions path gives exactly weighted_pairs' entries (scores bit for bit,
    order, ranks, each list's own score), ties on score and rank broken by id across
    the cut, duplicates within a list included, empty lists included."""
    rng = np.random.default_rng(5)
    names = np.array([f"c{i:02d}" for i in rng.permutation(60)], dtype=object)
    for trial in range(60):
        nv, nk = (0, 40) if trial == 0 else (40, 0) if trial == 1 else (40, 40)
        if unique:
            vpos, kpos = rng.permutation(60)[:nv], rng.permutation(60)[:nk]
        else:
            vpos, kpos = rng.integers(0, 60, nv), rng.integers(0, 60, nk)
        # coarse scores, so fused scores and best ranks tie often
        vs = np.sort(rng.integers(0, 4, nv) / 4).astype(np.float32)[::-1]
        ks = np.sort(rng.integers(0, 3, nk) * 1.5).astype(np.float32)[::-1]
        if trial == 2:
            vs[:] = 0.5  # all equal: every entry normalises to 1
        pairs_v = list(zip(names[vpos].tolist(), vs.tolist(), strict=True))
        pairs_k = list(zip(names[kpos].tolist(), ks.tolist(), strict=True))
        want = weighted_pairs(pairs_v, pairs_k, 0.4, 0.6, limit)
        got = weighted_positions((vpos, vs), (kpos, ks), names, 0.4, 0.6, limit)
        assert got == want


def test_weighted_positions_rejects_bad_input() -> None:
    names = np.array(["a", "b"], dtype=object)
    with pytest.raises(ValueError, match="keyword_hits: hit 'b'"):
        weighted_positions(
            (np.array([0]), np.array([0.5])), (np.array([1]), np.array([math.inf])), names
        )
    with pytest.raises(ValueError, match="vector_hits: hit 'a'"):
        weighted_positions(
            (np.array([1, 0]), np.array([0.5, math.nan])), (np.array([1]), np.array([1.0])), names
        )
    # a later copy of a listed id is ignored, its score too, as weighted_pairs does
    later_nan = (np.array([0, 1, 0]), np.array([0.5, 0.25, math.nan]))
    got = weighted_positions(later_nan, (np.array([1]), np.array([1.0])), names)
    assert got == weighted_pairs([("a", 0.5), ("b", 0.25), ("a", math.nan)], [("b", 1.0)])
    with pytest.raises(ValueError, match="vector_weight"):
        weighted_positions(
            (np.array([0]), np.array([0.5])),
            (np.array([1]), np.array([1.0])),
            names,
            vector_weight=-1.0,
        )
