"""Pure parts of a run: chunk hits → documents, metrics (ir-measures) on known rankings."""

from __future__ import annotations

import math

import pytest

from ragline.eval.runs import (
    EVAL_MODES,
    default_mode,
    documents_of,
    evaluate,
    parse_modes,
    per_query,
    percentiles,
)
from ragline.settings import Settings
from ragline.types import Chunk, Hit


def _hit(chunk_id: str, doc_id: str, score: float) -> Hit:
    chunk = Chunk(
        id=chunk_id, doc_id=doc_id, tenant="t", source="s", title="", chapter="", section="",
        heading_path=(), url="", anchor="", chunk_index=0, start_char=0, end_char=1,
        token_count=1, word_count=1, has_code=False, has_equations=False, content_hash="",
        created_at="", text="x",
    )  # fmt: skip
    return Hit(chunk=chunk, score=score)


def test_documents_take_their_best_chunks_place() -> None:
    hits = [_hit("c1", "A", 0.9), _hit("c2", "B", 0.8), _hit("c3", "A", 0.7), _hit("c4", "X", 0.6)]
    doc_of = {"A": "a", "B": "b"}  # X is not a corpus document
    assert documents_of(hits, doc_of) == [("a", 0.9), ("b", 0.8)]


def test_metrics_by_hand() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"z": 1}}
    ranking = {
        "q1": ["x", "a"],  # only relevant doc 2nd: RR 1/2, nDCG 1/log2(3)
        "q2": ["b", "x", "y", "c"],  # both found, at 1 and 4
        # q3 returned nothing: scores 0 but still counts
    }
    m = evaluate(qrels, ranking)
    idcg2 = 1 + 1 / math.log2(3)
    ndcg_q2 = (1 + 1 / math.log2(5)) / idcg2
    assert m["ndcg@10"] == pytest.approx((1 / math.log2(3) + ndcg_q2 + 0) / 3)
    assert m["mrr@10"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert m["recall@10"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["p@5"] == pytest.approx((1 / 5 + 2 / 5 + 0) / 3)
    # the seeds' cut-offs: q2's second relevant doc (rank 4) is outside top 3
    assert m["recall@3"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["ndcg@5"] == pytest.approx(m["ndcg@10"])  # nothing relevant at ranks 6-10
    assert m["mrr"] == pytest.approx(m["mrr@10"])
    assert per_query(qrels, ranking)["q1"] == pytest.approx(1 / math.log2(3))
    assert per_query(qrels, ranking)["q3"] == 0.0


def test_rank_order_is_kept_whatever_the_scores() -> None:
    # Equal engine scores must not let trec_eval reorder the ranking by document id.
    assert evaluate({"q": {"a": 1}}, {"q": ["b", "a"]})["mrr@10"] == pytest.approx(0.5)


def test_recall_at_100_sees_beyond_10() -> None:
    ranking = {"q": [f"n{i}" for i in range(20)] + ["a"]}
    m = evaluate({"q": {"a": 1}}, ranking)
    assert (m["recall@10"], m["recall@100"]) == (0.0, 1.0)
    assert m["mrr@10"] == 0.0
    assert m["mrr"] == pytest.approx(1 / 21)  # MRR without a cut-off sees rank 21
    assert m["ndcg@5"] == 0.0 and m["recall@3"] == 0.0


def test_percentiles() -> None:
    p = percentiles([float(i) for i in range(1, 101)])
    assert p["p50"] == pytest.approx(50.5)
    assert p["p99"] == pytest.approx(99.01)
    assert math.isnan(percentiles([])["p50"])


def test_modes() -> None:
    s = Settings()
    assert "rerank" not in parse_modes(None, s)
    # a model reranker (ragline's reader, a cross-encoder) makes rerank a default mode
    reader = s.model_copy(update={"reranker": "reader"})
    assert parse_modes(None, reader) == [*EVAL_MODES]
    cross = s.model_copy(update={"reranker": "cross-encoder", "reranker_model": "/m"})
    assert parse_modes(None, cross)[-1] == "rerank"
    assert parse_modes("bm25, vector,bm25", s) == ["bm25", "vector"]
    with pytest.raises(ValueError, match="unknown mode"):
        parse_modes("bm25,dense", s)
    assert default_mode(s.model_copy(update={"hybrid_merge_method": "weighted"})) == (
        "hybrid-weighted"
    )
    assert default_mode(s.model_copy(update={"hybrid_search_enabled": False})) == "vector"
