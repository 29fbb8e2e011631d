"""Rerankers: the heuristic blend (hand-computed) and a real, tiny cross-encoder."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import pytest

from ragline.retrieve.rerank import (
    CrossEncoderReranker,
    HeuristicReranker,
    Reranker,
    content_terms,
    keyword_overlap,
    make_reranker,
    passage_text,
    stem,
)
from ragline.settings import Settings
from ragline.types import Hit

HitFactory = Callable[..., Hit]


def ids(hits: list[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


# --- text normalisation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "key"),
    [
        (["normalize", "normalizes", "normalized", "normalizing", "normalization"], "normaliz"),
        (["run", "runs", "running"], "run"),
        (["study", "studies", "studied", "studying"], "study"),
        (["vector", "vectors"], "vector"),
        (["class", "classes"], "class"),
        (["compute", "computes", "computing", "computation"], "comput"),
    ],
)
def test_stem_conflates_variants(words: list[str], key: str) -> None:
    assert {stem(w) for w in words} == {key}


@pytest.mark.parametrize("word", ["gas", "bus", "corpus", "analysis", "bring", "station", "go"])
def test_stem_leaves_lookalikes_alone(word: str) -> None:
    assert stem(word) == word


def test_content_terms_lowercases_and_drops_stop_words() -> None:
    assert content_terms("What is the Learning-Rate of SGD_optimizers?") == {
        "learn",
        "rat",
        "sgd",
        "optimizer",
    }
    assert content_terms("what is it?") == set()


def test_keyword_overlap_reads_title_and_headings(make_hit: HitFactory) -> None:
    hit = make_hit(
        "a",
        text="Weights are updated each step.",
        title="Optimisation",
        heading_path=("Optimisation", "Momentum"),
    )
    terms = content_terms("momentum optimisation weight decay")
    assert keyword_overlap(terms, hit.chunk) == pytest.approx(3 / 4)
    assert keyword_overlap(set(), hit.chunk) == 0.0


# --- heuristic reranker -------------------------------------------------------------------


def test_heuristic_hand_computed_scores(make_hit: HitFactory) -> None:
    query = "gradient descent convergence"
    hits = [
        make_hit("a", text="Gradient descent converges slowly.", vector_score=0.5),
        make_hit("b", text="Something unrelated entirely.", vector_score=0.9),
        make_hit("c", text="Convergence of gradient descent.", vector_score=0.4),
    ]
    out = HeuristicReranker(alpha=0.7).rerank(query, hits, top_k=3)
    # a: "converges" → "converg", "convergence" → "convergenc": 2/3 overlap.
    expected = {"a": 0.7 * 0.5 + 0.3 * 2 / 3, "b": 0.7 * 0.9, "c": 0.7 * 0.4 + 0.3 * 1.0}
    assert ids(out) == ["b", "c", "a"]
    for h in out:
        assert h.score == pytest.approx(expected[h.chunk.id])
        assert h.rerank_score == h.score
    assert [h.rank for h in out] == [1, 2, 3]


def test_heuristic_alpha_moves_the_balance(make_hit: HitFactory) -> None:
    hits = [
        make_hit("sem", text="unrelated words", vector_score=0.8),
        make_hit("lex", text="transformer attention heads", vector_score=0.3),
    ]
    query = "attention heads"
    assert ids(HeuristicReranker(alpha=1.0).rerank(query, hits, 2)) == ["sem", "lex"]
    assert ids(HeuristicReranker(alpha=0.0).rerank(query, hits, 2)) == ["lex", "sem"]
    assert ids(HeuristicReranker(alpha=0.3).rerank(query, hits, 2)) == ["lex", "sem"]


def test_heuristic_unknown_similarity_uses_overlap_alone(make_hit: HitFactory) -> None:
    hit = make_hit("k", text="bm25 scoring with field boosts", keyword_score=9.0)
    out = HeuristicReranker().rerank("bm25 boosts ranking", [hit], top_k=1)
    assert out[0].score == pytest.approx(2 / 3)


def test_heuristic_stop_word_query_uses_similarity_then_order(make_hit: HitFactory) -> None:
    hits = [
        make_hit("x"),
        make_hit("y", vector_score=0.2),
        make_hit("z"),
        make_hit("w", vector_score=0.6),
    ]
    out = HeuristicReranker().rerank("what is it", hits, top_k=4)
    assert ids(out) == ["w", "y", "x", "z"]
    assert [h.score for h in out] == pytest.approx([0.6, 0.2, 0.0, 0.0])


def test_heuristic_top_k_ties_and_no_mutation(make_hit: HitFactory) -> None:
    hits = [make_hit(c, score=1.0, rank=9, text="same text", vector_score=0.5) for c in "qpr"]
    out = HeuristicReranker().rerank("same", hits, top_k=2)
    assert ids(out) == ["q", "p"]  # equal scores keep the incoming order
    assert [h.rank for h in out] == [1, 2]
    assert all(h.rank == 9 and h.rerank_score is None for h in hits)
    assert HeuristicReranker().rerank("same", [], top_k=5) == []


def test_heuristic_rejects_bad_arguments(make_hit: HitFactory) -> None:
    with pytest.raises(ValueError, match="alpha must be between 0 and 1"):
        HeuristicReranker(alpha=1.5)
    with pytest.raises(ValueError, match="alpha must be between 0 and 1"):
        HeuristicReranker(alpha=math.nan)
    with pytest.raises(ValueError, match="top_k must be >= 1"):
        HeuristicReranker().rerank("q", [make_hit("a")], top_k=0)


# --- cross-encoder reranker -------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised 2-layer BERT cross-encoder with the MiniLM WordPiece
    tokenizer, saved the way a real model folder is."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("tiny-cross-encoder")
    tok_file = resources.files("ragline.embed") / "assets" / "minilm-tokenizer.json"
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(tok_file),
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    torch.manual_seed(1234)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        initializer_range=0.5,  # wide weights: distinct passages get distinct scores
    )
    BertForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture
def passages(make_hit: HitFactory) -> list[Hit]:
    texts = [
        "Dropout randomly zeroes activations during training.",
        "The learning rate controls the step size of gradient descent.",
        "Convolutions share weights across spatial positions.",
        "Attention computes a weighted average of values.",
        "Batch normalization standardises layer inputs.",
    ]
    return [
        make_hit(f"c{i}", text=t, title="Dive into Deep Learning", section=f"Section {i}")
        for i, t in enumerate(texts)
    ]


def test_cross_encoder_reranks_real_hits(tiny_cross_encoder: Path, passages: list[Hit]) -> None:
    reranker = CrossEncoderReranker(str(tiny_cross_encoder), batch_size=2)
    out = reranker.rerank("what does the learning rate do?", passages, top_k=3)
    assert len(out) == 3
    assert [h.rank for h in out] == [1, 2, 3]
    scores = [h.score for h in out]
    assert all(math.isfinite(s) for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert all(h.rerank_score == h.score for h in out)
    assert len(set(ids(out))) == 3

    again = CrossEncoderReranker(str(tiny_cross_encoder)).rerank(
        "what does the learning rate do?", passages, top_k=3
    )
    assert ids(again) == ids(out)
    assert [h.score for h in again] == pytest.approx(scores, rel=1e-5)


def test_cross_encoder_scores_match_direct_predict(
    tiny_cross_encoder: Path, passages: list[Hit]
) -> None:
    from sentence_transformers import CrossEncoder

    query = "how does attention work"
    reranker = CrossEncoderReranker(str(tiny_cross_encoder))
    ours = reranker.scores(query, [h.chunk for h in passages])
    direct = CrossEncoder(str(tiny_cross_encoder)).predict(
        [(query, passage_text(h.chunk)) for h in passages]
    )
    assert ours == pytest.approx([float(s) for s in direct], rel=1e-5)
    assert len(set(ours)) == len(ours)  # the tiny model does tell passages apart

    out = reranker.rerank(query, passages, top_k=len(passages))
    by_score = sorted(zip(ours, ids(passages), strict=True), key=lambda p: -p[0])
    assert ids(out) == [cid for _, cid in by_score]


def test_passage_text_is_title_section_then_text(make_hit: HitFactory) -> None:
    hit = make_hit("a", text="Body.", title="Book", section="Intro")
    assert passage_text(hit.chunk) == "Book > Intro\nBody."
    same = make_hit("b", text="Body.", title="Book", section="Book")
    assert passage_text(same.chunk) == "Book\nBody."
    bare = make_hit("c", text="Body.", title="", section="")
    assert passage_text(bare.chunk) == "Body."


def test_cross_encoder_is_lazy_and_names_a_missing_folder(
    tmp_path: Path, make_hit: HitFactory
) -> None:
    missing = tmp_path / "no-such-model"
    reranker = CrossEncoderReranker(str(missing))  # nothing loaded yet
    assert reranker.rerank("q", [], top_k=3) == []
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        reranker.rerank("q", [make_hit("a")], top_k=1)


def test_cross_encoder_names_the_extra_when_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, make_hit: HitFactory
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=r"'st' extra"):
        CrossEncoderReranker(str(tmp_path)).rerank("q", [make_hit("a")], top_k=1)


def test_cross_encoder_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        CrossEncoderReranker("m", batch_size=0)
    with pytest.raises(ValueError, match="max_length must be >= 1"):
        CrossEncoderReranker("m", max_length=0)


# --- factory ----------------------------------------------------------------------------


def test_make_reranker_follows_settings(tmp_path: Path) -> None:
    heuristic = make_reranker(Settings())
    assert isinstance(heuristic, HeuristicReranker)
    assert isinstance(heuristic, Reranker)
    ce = make_reranker(Settings(reranker="cross-encoder", reranker_model=str(tmp_path)))
    assert isinstance(ce, CrossEncoderReranker)
    assert isinstance(ce, Reranker)
    assert ce.model_path == str(tmp_path)
