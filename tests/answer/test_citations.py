"""Citations: extraction, mapping to context blocks, verification, rewriting, streaming."""

from __future__ import annotations

import pytest

from ragline.answer.citations import (
    CitationTracker,
    SupportVerifier,
    claim_before,
    dice,
    extract_markers,
    key_content_gap,
    lexical_overlap,
    map_label,
    resolve_citations,
)
from ragline.answer.context import Context
from ragline.answer.embedding_cache import EmbeddingCache
from ragline.settings import Settings


@pytest.fixture
def verifier(cache: EmbeddingCache) -> SupportVerifier:
    s = Settings()
    return SupportVerifier(
        cache.vectors,
        s.citation_support_threshold,
        s.citation_lexical_weight,
        s.citation_key_coverage,
    )


def test_extracts_every_marker_form() -> None:
    text = (
        "A [1]. B [2, 3]. C [Citation 4]. D [Dropout > Regularization]. "
        "E [1][5]. F [2-4]. Maths $x \\in [0, 1]$ and `a[1]` are not citations."
    )
    found = [(m.text, m.numbers, m.label) for m in extract_markers(text)]
    assert found == [
        ("[1]", (1,), ""),
        ("[2, 3]", (2, 3), ""),
        ("[Citation 4]", (4,), ""),
        ("[Dropout > Regularization]", (), "Dropout > Regularization"),
        ("[1]", (1,), ""),
        ("[5]", (5,), ""),
        ("[2-4]", (2, 3, 4), ""),
    ]


def test_markdown_links_are_not_citations() -> None:
    assert extract_markers("see [the docs](https://x.org) for more") == []


def test_labels_map_by_exact_title_contains_then_dice(topic_context: Context) -> None:
    blocks = topic_context.blocks
    assert map_label("Dropout > Regularization", blocks) == [1]
    assert map_label("momentum", blocks) == [2]  # exact section, any case
    assert map_label("Sequence Models", blocks) == [4]  # exact title
    assert map_label("Hardware > GPU", blocks) == [3]  # contained in "Hardware > GPUs"
    assert map_label("Sequence Model > LSTMs", blocks) == [4]  # Dice > 0.5
    assert map_label("Cooking > Bread", blocks) == []


def test_dice_is_symmetric_and_bounded() -> None:
    assert dice("night", "nacht") == dice("nacht", "night") == 0.25
    assert dice("same", "same") == 1.0
    assert dice("", "x") == 0.0


def test_claim_is_the_sentence_before_the_marker() -> None:
    text = "Dropout helps. It zeroes activations [1][2]. Momentum averages gradients. [3]"
    markers = extract_markers(text)
    claims = [claim_before(text, m.start, markers) for m in markers]
    assert claims == [
        "It zeroes activations",
        "It zeroes activations",
        "Momentum averages gradients.",
    ]


def test_lexical_overlap_counts_content_words() -> None:
    assert (
        lexical_overlap("The forget gate keeps memory", "a forget gate keeps the memory cell")
        == 1.0
    )
    assert lexical_overlap("GPUs are fast", "bread rises slowly") == 0.0


def test_citation_beyond_the_context_is_dropped(
    topic_context: Context, verifier: SupportVerifier
) -> None:
    """The generator cites [7] with 5 contexts: removed, and every kept citation
    names a chunk of the context."""
    text = "Dropout zeroes a random fraction of the activations [1][7]. GPUs are fast [7]."
    r = resolve_citations(text, topic_context, verifier)
    assert r.text == "Dropout zeroes a random fraction of the activations [1]. GPUs are fast."
    assert r.dropped == ["[7]", "[7]"]
    assert [c.number for c in r.citations] == [1]
    assert {c.chunk_id for c in r.citations} <= topic_context.chunk_ids


def test_supported_citation_points_at_the_supporting_sentence(
    topic_context: Context, verifier: SupportVerifier
) -> None:
    text = "The forget gate decides how much of the memory cell is kept [Sequence Models > LSTM]."
    r = resolve_citations(text, topic_context, verifier)
    assert r.text == "The forget gate decides how much of the memory cell is kept [4]."
    (c,) = r.citations
    assert c.supported and c.number == 4 and c.chunk_id == "c3"
    assert c.support_text == "The forget gate decides how much of the memory cell is kept."
    chunk_text = topic_context.blocks[3].hit.chunk.text
    assert chunk_text[c.support_start : c.support_end] == c.support_text
    assert r.text[c.start : c.end] == "[4]"
    assert c.section == "LSTM" and c.url.endswith("d3.md") and c.anchor == "lstm"


def test_unsupported_citation_is_flagged_or_removed(
    topic_context: Context, verifier: SupportVerifier
) -> None:
    """[3] is about GPUs; the sentence is about dropout."""
    text = "Dropout zeroes a random fraction of the activations during training [3]."
    flagged = resolve_citations(text, topic_context, verifier)
    (c,) = flagged.citations
    assert c.number == 3 and not c.supported
    assert c.support_score < verifier.threshold
    assert flagged.text == text

    removed = resolve_citations(text, topic_context, verifier, remove_unsupported=True)
    assert removed.citations == []
    assert removed.text == "Dropout zeroes a random fraction of the activations during training."


def test_tracker_reports_each_citation_when_its_bracket_closes(
    topic_context: Context, verifier: SupportVerifier
) -> None:
    tracker = CitationTracker(topic_context, verifier)
    pieces = [
        "Momentum keeps a leaky ",
        "average of past gradients [",
        "2",
        "]. More [",
        "9] text.",
    ]
    events = [[c.number for c in tracker.feed(p)] for p in pieces]
    assert events == [[], [], [], [2], []]  # [9] names no block: no event
    final = tracker.finish()
    assert final.text == "Momentum keeps a leaky average of past gradients [2]. More text."
    assert final.dropped == ["[9]"]
    assert all(c.supported for c in final.citations)


# --- key content: a citation must carry what the sentence claims ---------------------


def test_a_span_must_carry_the_sentences_figures_names_and_key_terms() -> None:
    from ragline.answer.evidence import TermWeights

    span = "Revenue in the second quarter of 2020 was 6 billion dollars."
    w = TermWeights.of([span, "The company sells cars."])
    gap = key_content_gap("Revenue in the second quarter of 2020 was 5 billion.", span, "", w, 0.5)
    assert gap == "the source states other figures than 5"
    gap = key_content_gap("Revenue in 2019 was 6 billion.", span, "", w, 0.5)
    assert gap == "not in the source: 2019"
    gap = key_content_gap("The revenue Tesla reported was 6 billion.", span, "", w, 0.5)
    assert gap == "not in the source: Tesla"
    assert key_content_gap("Revenue in 2020 was 6 billion.", span, "", w, 0.5) == ""
    # the passage (title, other sentences) may name the entity
    label = "Tesla > Q2 2020\nThe company sells cars."
    assert key_content_gap("The revenue of Tesla was 6 billion.", span, label, w, 0.5) == ""


def test_the_key_coverage_setting_decides_a_sentence_with_other_content() -> None:
    from ragline.answer.evidence import TermWeights

    span = "Dropout zeroes a random fraction of the activations."
    w = TermWeights.of([span, "Momentum averages gradients."])
    claim = "Dropout zeroes a fraction of the activations at random during training."
    assert key_content_gap(claim, span, "", w, 0.4) == ""  # 49 %: "training", "during" missing
    assert key_content_gap(claim, span, "", w, 0.6).startswith("the source holds")


def test_a_citation_of_the_wrong_source_is_flagged(
    topic_context: Context, verifier: SupportVerifier
) -> None:
    """Same words, wrong year: the old score passes it, the key content does not."""
    claim = "Momentum keeps a leaky average of past gradients since 1850."
    support = verifier.check(claim, topic_context.blocks[1])
    assert support.score >= verifier.threshold  # topical overlap is high
    assert not support.supported and support.gap == "not in the source: 1850"


def test_an_invented_label_is_removed_and_listed_as_dropped(
    topic_context: Context, verifier: SupportVerifier
) -> None:
    """A ``[Label]`` naming no context block, placed as a citation, was left in the
    text and listed nowhere: it is removed and listed in ``dropped``; bracketed text
    inside a sentence stays as it is."""
    text = (
        "Dropout zeroes a random fraction of the activations [Dropout]. "
        "Transformers use attention [Vaswani et al. 2017]. "
        "Their [sic] result holds [Deep Learning Book][Momentum]."
    )
    r = resolve_citations(text, topic_context, verifier)
    assert "Vaswani" not in r.text and "Deep Learning Book" not in r.text
    assert r.dropped == ["[Vaswani et al. 2017]", "[Deep Learning Book]"]
    assert "Their [sic] result" in r.text
    assert r.text.startswith("Dropout zeroes a random fraction of the activations [1].")
    assert "Transformers use attention." in r.text
    assert {c.chunk_id for c in r.citations} <= topic_context.chunk_ids
