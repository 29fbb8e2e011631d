"""Confidence levels and reasons, small-talk detection, corpus suggestions."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ragline.answer.confidence import assess, confidence_score
from ragline.answer.smalltalk import smalltalk_kind, smalltalk_reply
from ragline.answer.suggestions import corpus_topics
from ragline.types import Chunk, DocumentRecord, Hit


def hits_with(make_chunk: Callable[..., Chunk], scores: list[float | None]) -> list[Hit]:
    return [
        Hit(chunk=make_chunk(f"c{i}", "text"), score=0.1, rank=i + 1, vector_score=s)
        for i, s in enumerate(scores)
    ]


def test_levels_and_reasons(make_chunk: Callable[..., Chunk]) -> None:
    high = assess(hits_with(make_chunk, [0.71, 0.6, 0.52, 0.5, 0.2]), 0.47, 0.65)
    assert (high.level, high.score) == ("high", 0.71)
    assert high.reason == "4 sources, top relevance 0.71"
    medium = assess(hits_with(make_chunk, [0.5, 0.3]), 0.47, 0.65)
    assert medium.level == "medium" and medium.reason == "1 source, top relevance 0.50"
    low = assess(hits_with(make_chunk, [0.3, 0.1]), 0.47, 0.65)
    assert low.level == "low" and "0.30 < 0.47" in low.reason
    assert assess([], 0.47, 0.65).level == "low"


def test_neighbours_and_keyword_only_hits_do_not_raise_confidence(
    make_chunk: Callable[..., Chunk],
) -> None:
    hits = hits_with(make_chunk, [0.3, None])
    hits.append(
        Hit(chunk=make_chunk("n", "x"), score=0.1, rank=1, vector_score=0.9, expanded_from="c0")
    )
    assert confidence_score(hits) == 0.3


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("hi", "greeting"),
        ("Hello there!", "greeting"),
        ("hey, how are you?", "greeting"),
        ("Thanks a lot!!", "thanks"),
        ("ok thanks, bye", "thanks"),
        ("Who are you?", "identity"),
        ("good morning bot", "greeting"),
        ("Goodbye.", "bye"),
    ],
)
def test_small_talk_is_recognised(message: str, kind: str) -> None:
    assert smalltalk_kind(message) == kind
    assert smalltalk_reply(message)


@pytest.mark.parametrize(
    "message",
    [
        "hi, what is dropout?",
        "How does a GAN work?",
        "thanks, and how do I install it?",
        "What is the help command?",
        "hello world program in python",
    ],
)
def test_questions_are_not_small_talk(message: str) -> None:
    assert smalltalk_reply(message) is None


def record(source: str, chapter: str, title: str, chunks: int) -> DocumentRecord:
    return DocumentRecord(
        doc_id=source,
        tenant="t",
        source=source,
        file_hash="h",
        chunk_count=chunks,
        token_count=chunks * 100,
        chapter=chapter,
        title=title,
        format="markdown",
        ingested_at="2024-01-01T00:00:00Z",
    )


def test_suggestions_name_the_largest_chapters_by_their_index_title() -> None:
    docs = [
        record("/b/gans/index.md", "gans", "Generative Adversarial Networks", 1),
        record("/b/gans/gan.md", "gans", "GANs", 30),
        record("/b/gans/dcgan.md", "gans", "DCGAN", 40),
        record("/b/rl/mdp.md", "rl", "Markov Decision Process", 20),
        record("/b/rl/qlearning.md", "rl", "Q-Learning", 25),
        record("/b/notes.md", "", "Notes", 2),
    ]
    assert corpus_topics(docs) == ["Generative Adversarial Networks", "Q-Learning", "Notes"]
    assert corpus_topics(docs, limit=1) == ["Generative Adversarial Networks"]
