"""The extractive generator: relevant, non-redundant, cited sentences in reading order."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ragline.answer.candidates import (
    Candidate,
    candidates,
    is_answer_sentence,
    table_row_sentences,
)
from ragline.answer.citations import CitationTracker, SupportVerifier
from ragline.answer.context import Context, build_context
from ragline.answer.embedding_cache import EmbeddingCache
from ragline.answer.evidence import (
    Evidence,
    EvidenceWeights,
    evidence_weights,
    question_constraints,
)
from ragline.answer.generators import extractive_generator
from ragline.answer.generators.base import GenerationRequest
from ragline.answer.generators.extractive import (
    ExtractiveGenerator,
    cite,
    claim_cites_further,
    claim_lead,
    claim_lead_key,
    claim_passage_key,
    select_sentences,
)
from ragline.answer.judging import ContextEvidence, judge_context
from ragline.answer.sentences import segments
from ragline.embed.base import Embedder
from ragline.embed.tokenizer import TokenCounter
from ragline.settings import Settings
from ragline.types import Chunk, Hit


def test_mmr_skips_near_duplicates_and_weak_sentences() -> None:
    relevance = [0.9, 0.89, 0.8, 0.3]
    sim = np.array(
        [
            [1.0, 0.97, 0.2, 0.1],
            [0.97, 1.0, 0.2, 0.1],
            [0.2, 0.2, 1.0, 0.1],
            [0.1, 0.1, 0.1, 1.0],
        ]
    )
    assert select_sentences(relevance, sim, max_sentences=3) == [0, 2]
    assert select_sentences(relevance, sim, max_sentences=1) == [0]
    assert select_sentences([], np.zeros((0, 0)), max_sentences=3) == []


def test_answer_sentences_read_on_their_own() -> None:
    assert is_answer_sentence("The forget gate decides how much of the memory is kept.")
    assert not is_answer_sentence("and then the gate decides how much is kept.")  # fragment
    assert not is_answer_sentence("What does the forget gate decide here?")
    assert not is_answer_sentence("The loss is computed as follows:")
    assert not is_answer_sentence("Too short here.")
    assert not is_answer_sentence("$a = b + c$ and $d = e$ where $x$.")


def test_cite_puts_the_marker_before_the_final_stop() -> None:
    assert cite("Momentum averages gradients.", 2) == "Momentum averages gradients [2]."
    assert cite("Momentum averages gradients", 2) == "Momentum averages gradients [2]."


def test_answer_cites_every_sentence_from_the_context(
    topic_context: Context, cache: EmbeddingCache
) -> None:
    gen = ExtractiveGenerator(cache.vectors, max_sentences=2)
    request = GenerationRequest(
        "Which gate of an LSTM decides what the memory cell keeps?", topic_context
    )
    text = "".join(d.text for d in gen.generate(request))
    assert "The forget gate decides how much of the memory cell is kept [4]." in text
    chosen = gen.compose(request)
    assert 1 <= len(chosen) <= 2
    assert [c.block for c in chosen] == sorted(c.block for c in chosen)  # reading order
    for cand in chosen:
        assert f"{cand.text.rstrip('.')} [{cand.block}]." in text
        assert cand.text.rstrip(".") in topic_context.blocks[cand.block - 1].text


def test_context_without_prose_gives_no_answer(cache: EmbeddingCache) -> None:
    gen = ExtractiveGenerator(cache.vectors)
    empty = Context(blocks=(), token_count=0, truncated=False)
    assert list(gen.generate(GenerationRequest("anything at all?", empty))) == []


def test_exercise_sections_are_not_answer_sources(
    make_chunk: Callable[..., Chunk], make_hit: Callable[..., Hit], count_tokens: TokenCounter
) -> None:
    task = make_chunk(
        "e",
        "Apply dropout to the first layer and see which rate works best.",
        title="Dropout",
        section="Exercises",
    )
    fact = make_chunk(
        "f",
        "Dropout zeroes a random fraction of the activations at every step.",
        title="Dropout",
        section="Dropout in Practice",
        doc_id="d2",
    )
    ctx = build_context([make_hit(task, 0.6, 1), make_hit(fact, 0.5, 2)], count_tokens, 2000)
    assert [(c.block, c.text) for c in candidates(ctx)] == [
        (2, "Dropout zeroes a random fraction of the activations at every step.")
    ]


def test_a_sentence_leading_into_a_formula_after_a_comma_is_kept(
    make_chunk: Callable[..., Chunk], make_hit: Callable[..., Hit], count_tokens: TokenCounter
) -> None:
    text = (
        "The estimate converges to the optimal value function whatever the start $V_0$,\n\n"
        "$$V^* = \\lim_k V_k.$$\n\nThe loss of a model is computed as follows:\n\n$$L = 0.$$"
    )
    ctx = build_context([make_hit(make_chunk("v", text), 0.6, 1)], count_tokens, 2000)
    assert [c.text for c in candidates(ctx)] == [
        "The estimate converges to the optimal value function whatever the start $V_0$."
    ]


TABLE = (
    "# Suppliers\n\n| Supplier | Country | Lead time (days) |\n| --- | --- | --- |\n"
    "| Fjordline Metals | Norway | 21 |\n| Castilla \\| Sons | Spain |  |\n| only one |  |  |"
)


def test_table_rows_read_as_sentences_naming_their_columns() -> None:
    rows = table_row_sentences(TABLE, segments(TABLE))
    assert rows == [
        (
            TABLE.index("| Fjordline"),
            "Supplier: Fjordline Metals; Country: Norway; Lead time (days): 21.",
        ),
        (TABLE.index("| Castilla"), "Supplier: Castilla | Sons; Country: Spain."),
    ]  # a row with one filled cell says nothing about the columns


def test_a_table_alone_answers_with_its_rows_but_not_beside_prose(
    make_chunk: Callable[..., Chunk], make_hit: Callable[..., Hit], count_tokens: TokenCounter
) -> None:
    sheet = make_chunk("s", TABLE, title="Supply", section="Suppliers")
    mixed = make_chunk(
        "m",
        "Lead times are agreed every year.\n\n| Supplier | Days |\n| --- | --- |\n| Acme | 5 |",
        title="Policy",
        section="Lead times",
        doc_id="d2",
    )
    ctx = build_context([make_hit(sheet, 0.6, 1), make_hit(mixed, 0.5, 2)], count_tokens, 2000)
    assert [(c.block, c.text) for c in candidates(ctx)] == [
        (1, "Supplier: Fjordline Metals; Country: Norway; Lead time (days): 21."),
        (1, "Supplier: Castilla | Sons; Country: Spain."),
        (2, "Lead times are agreed every year."),
    ]


def test_evidence_led_answer_starts_with_the_answering_sentence_without_padding(
    make_chunk: Callable[..., Chunk],
    make_hit: Callable[..., Hit],
    count_tokens: TokenCounter,
    cache: EmbeddingCache,
) -> None:
    """The better-ranked block is about Q1; the answer (Q2) leads, nothing topical is added."""
    q1 = make_chunk(
        "a",
        "Contents: Prepared Remarks and Questions and Answers for the quarter. "
        "The company reported its results for the first quarter of 2020 in April. "
        "Revenue in the first quarter of 2020 was 5.99 billion dollars.",
        title="Q1 2020 earnings",
        doc_id="q1",
    )
    q2 = make_chunk(
        "b",
        "The call was held on a Wednesday afternoon with many analysts. "
        "Revenue in the second quarter of 2020 was 6.04 billion dollars.",
        title="Q2 2020 earnings",
        doc_id="q2",
    )
    ctx = build_context([make_hit(q1, 0.7, 1), make_hit(q2, 0.65, 2)], count_tokens, 2000)
    request = GenerationRequest("What was the revenue in the second quarter of 2020?", ctx)
    led = ExtractiveGenerator(cache.vectors, evidence=EvidenceWeights(threshold=0.5))
    learned = ExtractiveGenerator(
        cache.vectors, evidence=evidence_weights(Settings(evidence_scorer="learned"))
    )
    for gen in (led, learned):  # the weighted score, and the learned one on its own
        chosen = gen.compose(request)
        assert chosen[0].text == "Revenue in the second quarter of 2020 was 6.04 billion dollars."
        assert all("Contents" not in c.text and "Wednesday" not in c.text for c in chosen)
    # a threshold no sentence reaches: the generator alone falls back to relevance order
    strict = ExtractiveGenerator(cache.vectors, evidence=EvidenceWeights(threshold=0.99))
    assert strict.compose(request) == ExtractiveGenerator(cache.vectors).compose(request)


def test_the_answerers_evidence_check_is_reused_not_repeated(
    make_chunk: Callable[..., Chunk],
    make_hit: Callable[..., Hit],
    count_tokens: TokenCounter,
    cache: EmbeddingCache,
) -> None:
    """A verdict made with the generator's own weights is reused (the question is not
    embedded again, the answer is the same); one made with other weights is not."""
    text = (
        "The forget gate decides how much of the memory cell is kept. "
        "The input gate decides how much of the new candidate enters the cell. "
        "An LSTM was proposed by Hochreiter and Schmidhuber in 1997."
    )
    ctx = build_context([make_hit(make_chunk("a", text, title="LSTM"), 0.7, 1)], count_tokens, 2000)
    question = "Which gate decides how much of the memory cell is kept?"
    weights = EvidenceWeights(threshold=0.3)
    seen: list[str] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        seen.extend(texts)
        return cache.vectors(texts)

    gen = ExtractiveGenerator(embed, evidence=weights)
    fresh = gen.compose(GenerationRequest(question, ctx))
    assert question in seen
    verdict = judge_context(question, ctx, cache.vectors, weights)
    seen.clear()
    reused = gen.compose(GenerationRequest(question, ctx, evidence=verdict))
    assert reused == fresh and reused[0].text.startswith("The forget gate")
    assert question not in seen
    other = judge_context(question, ctx, cache.vectors, EvidenceWeights(threshold=0.99))
    assert gen.compose(GenerationRequest(question, ctx, evidence=other)) == fresh
    assert question in seen


def test_the_citation_check_finds_the_cited_blocks_sentences_embedded(
    embedder: Embedder,
    make_chunk: Callable[..., Chunk],
    make_hit: Callable[..., Hit],
    count_tokens: TokenCounter,
) -> None:
    """Generating embeds the cited block's other sentences (headings, short ones) in
    one batch, so checking the citations afterwards asks the model for nothing."""
    text = (
        "Gates at work\n\nIt matters. "
        "The forget gate decides how much of the memory cell is kept. "
        "See below"
    )
    ctx = build_context([make_hit(make_chunk("a", text, title="LSTM"), 0.7, 1)], count_tokens, 2000)
    cache = EmbeddingCache(embedder)
    gen = ExtractiveGenerator(cache.vectors, evidence=EvidenceWeights(threshold=0.3))
    answer = "".join(
        d.text for d in gen.generate(GenerationRequest("What does the forget gate decide?", ctx))
    )
    assert answer == "The forget gate decides how much of the memory cell is kept [1]."
    before = cache.embedded
    tracker = CitationTracker(ctx, SupportVerifier(cache.vectors, 0.43, 0.6))
    tracker.feed(answer)
    citations = tracker.finish().citations
    assert [c.supported for c in citations] == [True]
    assert cache.embedded == before


def test_a_claims_lead_prefers_a_long_late_sentence_over_a_slightly_likelier_opening() -> None:
    """SciFact's rationale sentences are results: long and late in the abstract."""
    opening = claim_lead_key(0.40, 12, 0.0)
    result = claim_lead_key(0.30, 32, 1.0)
    assert result > opening
    # the probability still decides between sentences alike in length and place
    assert claim_lead_key(0.40, 20, 0.5) > claim_lead_key(0.30, 20, 0.5)
    # but not by much: a sentence far less likely is not taken for its length
    assert claim_lead_key(0.40, 12, 0.0) > claim_lead_key(0.05, 40, 1.0)


def test_a_claims_lead_is_rechosen_within_its_passage_only() -> None:
    cands = (
        Candidate(1, 0, "Topic opening of the first abstract here."),
        Candidate(
            1, 50, "A long results sentence of the first abstract, reporting what was found."
        ),
        Candidate(2, 0, "A long sentence of the second abstract that is late in it and long."),
    )
    judged = tuple(Evidence(i, p, True, 0.5, 0.5, 0.5) for i, p in enumerate((0.40, 0.30, 0.35)))
    ev = ContextEvidence(
        question_constraints("Aspirin lowers the risk."), cands, judged, judged[0], ()
    )
    assert claim_lead(ev, judged, judged[0]) is judged[1]
    assert claim_lead(ev, judged, judged[2]) is judged[2]


def test_a_claims_further_sentences_need_the_extra_bar(
    make_chunk: Callable[..., Chunk],
    make_hit: Callable[..., Hit],
    count_tokens: TokenCounter,
    cache: EmbeddingCache,
) -> None:
    """A statement's answer cites a further sentence only when its learned probability
    reaches ``RAGLINE_EXTRACTIVE_CLAIM_EXTRA_MIN`` (0.1, chosen on SciFact train);
    a question's answer is not affected. (Both blocks are of one document: another
    document ranked after the lead's is not cited at all, see below.)"""
    first = make_chunk(
        "a",
        "Aspirin reduced the risk of colorectal cancer by a third in the trial cohort.",
        title="Aspirin trial",
        doc_id="d1",
    )
    second = make_chunk(
        "b",
        "Daily low doses of aspirin were given to patients with a history of adenomas.",
        title="Aspirin dosing",
        doc_id="d1",
        chunk_index=4,
    )
    ctx = build_context([make_hit(first, 0.7, 1), make_hit(second, 0.6, 2)], count_tokens, 2000)
    weights = evidence_weights(Settings())
    gen = extractive_generator(Settings(), cache.vectors)
    assert gen.claim_extra_min == 0.1
    found = tuple(candidates(ctx))
    assert [c.block for c in found] == [1, 2]

    def cited(text: str, probs: tuple[float, float]) -> list[int]:
        judged = tuple(Evidence(i, p, p >= 0.065, 0.5, 0.5, 0.5) for i, p in enumerate(probs))
        ev = ContextEvidence(
            question_constraints(text), found, judged, judged[0], (), weights=weights
        )
        return [c.block for c in gen.compose(GenerationRequest(text, ctx, evidence=ev))]

    claim = "Aspirin lowers the risk of colorectal cancer."
    assert weights.learned_for(question_constraints(claim))
    assert cited(claim, (0.12, 0.095)) == [1]  # within 0.75 of the lead, below the bar
    assert cited(claim, (0.12, 0.11)) == [1, 2]
    question = "Does aspirin lower the risk of colorectal cancer?"
    assert cited(question, (0.12, 0.095)) == [1, 2]


def test_a_claims_passage_gives_up_log_odds_per_place_down_the_context() -> None:
    """With weight 1 (chosen on SciFact train), a passing sentence two places down
    needs e² times the odds of the first block's to be answered from; weight 0 is the
    learned probability alone."""
    assert claim_passage_key(0.15, 1, 1.0) > claim_passage_key(0.30, 3, 1.0)
    assert claim_passage_key(0.15, 1, 0.0) < claim_passage_key(0.30, 3, 0.0)
    # a sentence far likelier still wins from lower down
    assert claim_passage_key(0.90, 2, 1.0) > claim_passage_key(0.15, 1, 1.0)
    # alike places: the probability decides
    assert claim_passage_key(0.20, 4, 1.0) > claim_passage_key(0.15, 4, 1.0)


def test_a_claims_further_sentence_of_another_document_must_not_rank_below_the_lead() -> None:
    def further(p: float, rank: int, same: bool, lead: int, ranks: int = 0) -> bool:
        return claim_cites_further(p, rank, same, lead, extra_min=0.1, other_document_ranks=ranks)

    assert further(0.12, 5, True, 1)  # the lead's document, any place
    assert not further(0.12, 2, False, 1)  # another document, ranked after the lead's
    assert further(0.12, 1, False, 2)  # another document, ranked ahead of it
    assert further(0.12, 2, False, 1, ranks=1)
    assert not further(0.12, 3, False, 1, ranks=1)
    assert not further(0.09, 1, True, 1)  # the bar holds for every further sentence


def test_a_claim_is_answered_from_the_better_ranked_passage_and_its_document(
    make_chunk: Callable[..., Chunk],
    make_hit: Callable[..., Hit],
    count_tokens: TokenCounter,
    cache: EmbeddingCache,
) -> None:
    """The scorer slightly prefers block 2 (another document): by default the answer
    leads with block 1, cites block 3 of the same document and not block 2; the
    settings' earlier behaviour (weight 0, no document rule) leads with block 2."""
    first = make_chunk(
        "a",
        "Aspirin reduced the risk of colorectal cancer by a third in the trial cohort.",
        title="Aspirin trial",
        doc_id="d1",
    )
    second = make_chunk(
        "b",
        "Daily low doses of aspirin were given to patients with a history of adenomas.",
        title="Aspirin dosing",
        doc_id="d2",
    )
    third = make_chunk(
        "c",
        "Colorectal adenomas recurred less often among the patients who took aspirin.",
        title="Aspirin trial",
        doc_id="d1",
        chunk_index=3,
    )
    hits = [make_hit(first, 0.7, 1), make_hit(second, 0.6, 2), make_hit(third, 0.5, 3)]
    ctx = build_context(hits, count_tokens, 2000)
    found = tuple(candidates(ctx))
    assert [c.block for c in found] == [1, 2, 3]
    settings = Settings()
    weights = evidence_weights(settings)
    claim = "Aspirin lowers the risk of colorectal cancer."
    judged = tuple(Evidence(i, p, True, 0.5, 0.5, 0.5) for i, p in enumerate((0.13, 0.15, 0.12)))
    ev = ContextEvidence(question_constraints(claim), found, judged, judged[1], (), weights=weights)
    request = GenerationRequest(claim, ctx, evidence=ev)
    gen = extractive_generator(settings, cache.vectors)
    assert (gen.claim_rank_weight, gen.claim_other_document_ranks) == (1.0, 0)

    def cited(rank_weight: float, ranks: int | None) -> list[int]:
        gen.claim_rank_weight, gen.claim_other_document_ranks = rank_weight, ranks
        return [c.block for c in gen.compose(request)]

    assert cited(1.0, 0) == [1, 3]
    assert cited(1.0, 1) == [1, 2, 3]
    assert cited(0.0, None) == [2, 1, 3]
    assert cited(0.0, 0) == [2, 1]  # block 1 ranks ahead of the lead's; block 3 does not
