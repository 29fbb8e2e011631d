"""Judging a context with the learned scorer and its shipped thresholds (real embeddings)."""

from __future__ import annotations

from ragline.answer.context import Context
from ragline.answer.embedding_cache import EmbeddingCache
from ragline.answer.evidence import FEATURES, evidence_weights
from ragline.answer.judging import judge_context
from ragline.settings import Settings

LEARNED = Settings(evidence_scorer="learned")


def test_the_learned_claim_threshold_keeps_a_supported_claim_and_drops_an_off_topic_one(
    topic_context: Context, cache: EmbeddingCache
) -> None:
    """evidence_learned_claim_threshold (0.065): the claim the Dropout block states passes,
    a claim none of the five blocks holds does not (its best sentence scores about 0.03)."""
    w = evidence_weights(LEARNED)
    assert w.scorer is not None
    assert w.learned_claim_threshold == LEARNED.evidence_learned_claim_threshold
    yes = judge_context(
        "Dropout zeroes a random fraction of the activations during training.",
        topic_context,
        cache.vectors,
        w,
    )
    best = yes.best_candidate()
    assert yes.answers and best is not None and best.block == 1
    assert all(len(f) == len(FEATURES) for f in yes.features)
    no = judge_context(
        "Batch normalization speeds up training of deep networks.",
        topic_context,
        cache.vectors,
        w,
    )
    assert not no.answers and no.best is not None and no.best.score < w.learned_claim_threshold
    strict = evidence_weights(LEARNED.model_copy(update={"evidence_learned_claim_threshold": 0.9}))
    assert not judge_context(
        "Dropout zeroes a random fraction of the activations during training.",
        topic_context,
        cache.vectors,
        strict,
    ).answers


def test_the_learned_question_threshold_leaves_the_decision_to_the_vetoes(
    topic_context: Context, cache: EmbeddingCache
) -> None:
    """evidence_learned_threshold (0.001, the highest that kept 95 % of the d2l fit
    questions): the answering LSTM sentence passes; at 0.5 it would not."""
    q = "Which gate of an LSTM decides how much of the memory cell is kept?"
    ev = judge_context(q, topic_context, cache.vectors, evidence_weights(LEARNED))
    best = ev.best_candidate()
    assert ev.answers and best is not None and best.text.startswith("The forget gate decides")
    strict = evidence_weights(LEARNED.model_copy(update={"evidence_learned_threshold": 0.5}))
    assert not judge_context(q, topic_context, cache.vectors, strict).answers


def test_by_default_claims_get_the_learned_score_and_questions_the_weighted_one(
    topic_context: Context, cache: EmbeddingCache
) -> None:
    """claims-learned: on SciFact claims the learned scorer cites far more precisely,
    on d2l questions it cites less (benchmarks/results/evidence_scorer.md)."""
    default = evidence_weights(Settings())
    learned = evidence_weights(LEARNED)
    weighted = evidence_weights(Settings(evidence_scorer="weighted"))
    assert Settings().evidence_scorer == "claims-learned" and weighted.scorer is None
    claim = "Dropout zeroes a random fraction of the activations during training."
    question = "Which gate of an LSTM decides how much of the memory cell is kept?"
    for text, same_as in ((claim, learned), (question, weighted)):
        got = judge_context(text, topic_context, cache.vectors, default)
        want = judge_context(text, topic_context, cache.vectors, same_as)
        assert [e.score for e in got.judged] == [e.score for e in want.judged]
        assert [e.answers for e in got.judged] == [e.answers for e in want.judged]
    assert default.learned_claim_threshold == Settings().evidence_learned_claim_threshold
    assert default.claim_threshold == Settings().evidence_claim_threshold
    assert default.threshold == Settings().evidence_threshold


def test_the_learned_scorer_judges_english_only(
    topic_context: Context, cache: EmbeddingCache
) -> None:
    """The scorer was fitted on English claims and questions: a statement in another
    language gets the weighted score and the weighted claim threshold, in every mode
    (on react.dev, Japanese answers citing the right page fell from 17/20 to 14/20
    under the learned claim scorer)."""
    claim = "ドロップアウトは訓練中に活性化のランダムな一部をゼロにします。"
    english = "Dropout zeroes a random fraction of the activations during training."
    weighted = evidence_weights(Settings(evidence_scorer="weighted"))
    for mode in ("claims-learned", "learned"):
        w = evidence_weights(Settings(evidence_scorer=mode))
        got = judge_context(claim, topic_context, cache.vectors, w)
        want = judge_context(claim, topic_context, cache.vectors, weighted)
        assert not got.constraints.english and not w.learned_for(got.constraints)
        assert [e.score for e in got.judged] == [e.score for e in want.judged]
        assert [e.answers for e in got.judged] == [e.answers for e in want.judged]
        en = judge_context(english, topic_context, cache.vectors, w)
        assert en.constraints.english and w.learned_for(en.constraints)
        assert [e.score for e in en.judged] != [
            e.score for e in judge_context(english, topic_context, cache.vectors, weighted).judged
        ]
