"""Pseudo-relevance feedback terms and definition subjects (pure)."""

from __future__ import annotations

from collections import Counter

from ragline.retrieve.prf import defines, definition_subject, feedback_terms


def test_feedback_terms_weight_by_score_and_skip_query_terms() -> None:
    q = Counter({"dropout": 1})
    fb = [
        (Counter({"dropout": 3, "regular": 2, "nois": 1}), 6, 3.0),
        (Counter({"regular": 1, "weight": 1}), 2, 2.0),
        (Counter({"ignor": 5}), 5, 0.0),  # a zero score adds nothing
    ]
    assert feedback_terms(q, fb, 2) == ["regular", "weight"]
    assert feedback_terms(q, [], 5) == []
    assert "dropout" not in feedback_terms(q, fb, 10)


def test_definition_subjects() -> None:
    assert definition_subject("Dropout is a regularization technique.") == "Dropout"
    assert definition_subject("## Softmax\n\nThe softmax function (softargmax) is a map.") == (
        "softmax function"
    )
    assert definition_subject("- **Weight decay**: a penalty on large weights.") == "Weight decay"
    assert definition_subject("Un reducer es una función pura.") == "reducer"
    assert definition_subject("In this section we train a CNN.") is None


def test_defines_needs_every_subject_term_in_the_query() -> None:
    text = "A generative adversarial network is a pair of networks trained together."
    assert defines(text, {"generat", "adversari", "network", "what"})
    assert not defines(text, {"network"})
