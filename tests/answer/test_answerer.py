"""The answer pipeline: confidence gate, small talk, citations checked, streaming events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ragline.answer.answerer import Answerer
from ragline.answer.embedding_cache import EmbeddingCache
from ragline.answer.generators.base import Delta, GenerationRequest
from ragline.answer.generators.extractive import ExtractiveGenerator
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.answer.generators.prompt import FALLBACK_ANSWER
from ragline.embed.tokenizer import TokenCounter
from ragline.settings import Settings
from ragline.types import Answer, Chunk, Filters, Hit, SearchResult, StreamEvent


class RecordingSearch:
    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits
        self.calls: list[str] = []

    def __call__(
        self,
        query: str,
        *,
        mode: Any = None,
        top_k: int | None = None,
        filters: Filters | None = None,
        expand: int | None = None,
    ) -> SearchResult:
        self.calls.append(query)
        return SearchResult(query, "hybrid", list(self.hits), {"total": 1.0})


class ScriptedGenerator:
    """Writes a fixed answer (in pieces) and records every call."""

    def __init__(self, *pieces: str) -> None:
        self.pieces = pieces
        self.calls: list[GenerationRequest] = []

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "script-1"

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        self.calls.append(request)
        for p in self.pieces:
            yield Delta(text=p)


def answerer(
    hits: list[Hit], generator: Any, cache: EmbeddingCache, **settings: Any
) -> tuple[Answerer, RecordingSearch]:
    search = RecordingSearch(hits)
    a = Answerer(
        Settings(**settings),
        search,
        generator,
        cache.vectors,
        TokenCounter(),
        suggest=lambda: ["Dropout", "Optimizers"],
    )
    return a, search


def final(events: list[StreamEvent]) -> Answer:
    assert events[-1].type == "done" and events[-1].answer is not None
    assert sum(e.type == "done" for e in events) == 1
    return events[-1].answer


def test_below_the_threshold_the_generator_is_not_called(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    for h in five_hits:
        h.vector_score = 0.2
    gen = ScriptedGenerator("Invented answer [1].")
    a, search = answerer(five_hits, gen, cache)
    ans = a.answer("What is the capital of Australia?")
    assert gen.calls == []  # the generator was never asked
    assert search.calls == ["What is the capital of Australia?"]
    assert ans.fallback and ans.text.startswith(FALLBACK_ANSWER)
    assert ans.suggestions == ["Dropout", "Optimizers"] and "Dropout; Optimizers" in ans.text
    assert ans.confidence.level == "low" and ans.citations == [] and ans.sources == []


def test_small_talk_gets_a_short_reply_without_retrieval(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    gen = ScriptedGenerator("x")
    a, search = answerer(five_hits, gen, cache)
    events = list(a.stream("Hello there!"))
    ans = final(events)
    assert ans.smalltalk and ans.confidence.score == 0.0
    assert search.calls == [] and gen.calls == []
    assert [e.type for e in events] == ["token", "done"] and events[0].text == ans.text


def test_extractive_answer_streams_tokens_then_citations_then_done(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    a, _ = answerer(five_hits, ExtractiveGenerator(cache.vectors), cache)
    events = list(a.stream("What does the forget gate of an LSTM decide?"))
    ans = final(events)
    assert "The forget gate decides how much of the memory cell is kept [4]." in ans.text
    streamed = [e.citation for e in events if e.type == "citation"]
    assert [c.number for c in streamed if c] == [c.number for c in ans.citations]
    context_ids = {cid for s in ans.sources for cid in s.chunk_ids}
    assert ans.citations and all(c.chunk_id in context_ids for c in ans.citations)
    assert all(c.supported for c in ans.citations)
    assert ans.complete and not ans.fallback and ans.generator == "extractive"
    assert ans.confidence.level in {"medium", "high"}
    assert {"retrieve", "context", "generate", "verify", "total"} <= set(ans.timings_ms)
    assert ans.usage["context_tokens"] > 0


def test_generator_citing_a_block_that_does_not_exist_is_corrected(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    gen = ScriptedGenerator(
        "Dropout zeroes a random fraction of the activations [1]. ",
        "Bread needs yeast [7]. GPUs run thousands of threads in parallel [Citation 3].",
    )
    # An open "tell me about" names no answer; this test is about citation mapping.
    a, _ = answerer(five_hits, gen, cache, evidence_check=False)
    events = list(a.stream("Tell me about dropout and GPUs"))
    ans = final(events)
    assert len(gen.calls[0].context.blocks) == 5
    assert ans.text == (
        "Dropout zeroes a random fraction of the activations [1]. Bread needs yeast. "
        "GPUs run thousands of threads in parallel [3]."
    )
    assert ans.dropped_citations == ["[7]"]
    assert [c.number for c in ans.citations] == [1, 3]
    assert all(e.citation.number != 7 for e in events if e.citation)
    assert all(ans.text[c.start : c.end] == f"[{c.number}]" for c in ans.citations)


def test_citation_offsets_follow_the_trimmed_answer_text(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    # A model that opens with blank space: the answer text is trimmed, and the
    # citations must still sit on their markers in it.
    gen = ScriptedGenerator("\n  Dropout zeroes a random fraction ", "of the activations [1].\n")
    a, _ = answerer(five_hits, gen, cache)
    ans = final(list(a.stream("What does dropout do?")))
    assert ans.text.startswith("Dropout") and ans.text.endswith("[1].")
    (c,) = ans.citations
    assert ans.text[c.start : c.end] == "[1]"


@pytest.mark.parametrize("policy", ["flag", "remove"])
def test_unsupported_citation_is_flagged_or_removed(
    policy: str, five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    gen = ScriptedGenerator("Momentum keeps a leaky average of past gradients [5].")
    a, _ = answerer(five_hits, gen, cache, unsupported_citations=policy)
    events = list(a.stream("What is momentum?"))
    ans = final(events)
    if policy == "flag":
        (c,) = ans.citations
        assert c.number == 5 and not c.supported
        assert [e.citation.supported for e in events if e.citation] == [False]
        assert ans.to_dict()["metadata"]["unsupported_citations"] == 1
    else:
        assert ans.citations == [] and not [e for e in events if e.type == "citation"]
        assert ans.text == "Momentum keeps a leaky average of past gradients."


def test_empty_generation_becomes_the_fallback(five_hits: list[Hit], cache: EmbeddingCache) -> None:
    a, _ = answerer(five_hits, ScriptedGenerator(), cache, evidence_check=False)
    ans = a.answer("Anything?")
    assert ans.fallback and ans.text == FALLBACK_ANSWER and ans.complete


def test_bad_input_fails_at_the_call(five_hits: list[Hit], cache: EmbeddingCache) -> None:
    a, search = answerer(five_hits, ScriptedGenerator("x"), cache)
    with pytest.raises(ValueError, match="question is empty"):
        a.stream("   ")
    with pytest.raises(ValueError, match="limit is 1000"):
        a.stream("why " * 300)
    with pytest.raises(ValueError, match=r"history\[1\]\.role"):
        a.stream(
            "What is dropout?",
            history=[{"role": "user", "content": "a"}, {"role": "system", "content": "b"}],
        )
    assert search.calls == []


def test_openai_stream_emits_citations_as_they_complete_and_sends_history(
    five_hits: list[Hit], cache: EmbeddingCache, llm_server: Any
) -> None:
    url, llm = llm_server
    llm.script = [
        (
            "stream",
            [
                "The forget gate decides how much of the memory cell is kept [",
                "4]",
                ". Dropout zeroes activations [1].",
                " Done.",
            ],
            "done",
        )
    ]
    gen = OpenAIGenerator(url, "m", sleep=lambda s: None)
    a, _ = answerer(five_hits, gen, cache)
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(12)
    ]
    events = list(a.stream("What does the forget gate do?", history=history))
    kinds = [(e.type, e.text or (e.citation.number if e.citation else None)) for e in events]
    assert kinds[:6] == [
        ("token", "The forget gate decides how much of the memory cell is kept ["),
        ("token", "4]"),
        ("citation", 4),  # as soon as its bracket closed, before the next token
        ("token", ". Dropout zeroes activations [1]."),
        ("citation", 1),
        ("token", " Done."),
    ]
    c4 = events[2].citation
    assert c4 is not None and c4.chunk_id == "c3" and c4.section == "LSTM"
    assert c4.support_text == "The forget gate decides how much of the memory cell is kept."
    ans = final(events)
    assert ans.complete and ans.model == "m" and ans.usage["total_tokens"] == 124
    sent = llm.requests[0]["body"]["messages"]
    assert [m["content"] for m in sent[1:-1]] == [f"turn {i}" for i in range(2, 12)]


def test_stream_cut_mid_answer_gives_an_error_event_and_an_incomplete_answer(
    five_hits: list[Hit], cache: EmbeddingCache, llm_server: Any
) -> None:
    url, llm = llm_server
    llm.script = [("stream", ["Dropout zeroes a random fraction [1]", " of the"], "cut")]
    a, _ = answerer(five_hits, OpenAIGenerator(url, "m", sleep=lambda s: None), cache)
    events = list(a.stream("What is dropout?"))
    types = [e.type for e in events]
    assert types == ["token", "citation", "token", "error", "done"]
    assert "stream cut" in events[3].error
    ans = final(events)
    assert not ans.complete and ans.error and "stream cut" in ans.error
    assert ans.text == "Dropout zeroes a random fraction [1] of the"
    assert [c.number for c in ans.citations] == [1]
    assert ans.to_dict()["metadata"]["complete"] is False


def test_keyword_only_hits_get_a_relevance_for_the_confidence_gate(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    """``--mode bm25`` returns hits without cosines; they are embedded, not refused."""
    for h in five_hits:
        h.vector_score = None
    a, _ = answerer(five_hits, ExtractiveGenerator(cache.vectors), cache)
    ans = a.answer("Which gate of an LSTM decides how much of the memory cell is kept?")
    assert not ans.fallback and ans.confidence.level != "low"
    assert "[4]" in ans.text
    lstm = next(s for s in ans.sources if s.number == 4)
    assert lstm.hit.vector_score is not None and lstm.hit.vector_score > 0.47
    # the LSTM chunk is the closest: the score averages its cosine with the evidence
    assert lstm.hit.vector_score == max(s.hit.vector_score or 0.0 for s in ans.sources)


# --- the evidence check -------------------------------------------------------------

WIMBLEDON = [
    (
        "Wimbledon 2022",
        "Women's singles final",
        "Elena Rybakina won the women's singles final at Wimbledon in 2022. She beat "
        "Ons Jabeur in three sets on Centre Court.",
    ),
    (
        "Wimbledon 2022",
        "Tournament",
        "The 2022 Wimbledon Championships were played on grass in London. Russian and "
        "Belarusian players were banned from the tournament that year.",
    ),
]


@pytest.fixture
def wimbledon(make_chunk: Callable[..., Chunk], make_hit: Callable[..., Hit]) -> list[Hit]:
    return [
        make_hit(make_chunk(f"w{i}", text, title=t, section=s, doc_id=f"w{i}"), 0.7 - i / 10, i + 1)
        for i, (t, s, text) in enumerate(WIMBLEDON)
    ]


def test_topical_passages_that_do_not_answer_give_the_related_fallback(
    wimbledon: list[Hit], cache: EmbeddingCache
) -> None:
    """Same event, another year: the cosine is high, the evidence is not there."""
    gen = ScriptedGenerator("Elena Rybakina won [1].")
    a, _ = answerer(wimbledon, gen, cache)
    ans = a.answer("Who won the 2018 Wimbledon women's singles?")
    assert gen.calls == []  # the generator was never asked
    assert ans.fallback and ans.text.startswith(FALLBACK_ANSWER)
    assert ans.confidence.level == "low"
    assert ans.confidence.reason == "the passages cover 2022, not 2018"
    assert "Related passages, which do not answer it" in ans.text
    assert "Wimbledon 2022 > Women's singles final" in ans.text
    assert ans.citations == [] and [s.number for s in ans.sources] == [1, 2]
    assert "evidence" in ans.timings_ms


def test_the_same_passages_answer_the_question_they_hold(
    wimbledon: list[Hit], cache: EmbeddingCache
) -> None:
    a, _ = answerer(wimbledon, ExtractiveGenerator(cache.vectors), cache)
    ans = a.answer("Who won the 2022 Wimbledon women's singles?")
    assert not ans.fallback and ans.text.startswith("Elena Rybakina won")
    assert ans.confidence.level in {"medium", "high"}
    assert "the reader finds the answer in [1] Wimbledon 2022" in ans.confidence.reason


def test_the_evidence_judge_names_the_answering_sentence(
    wimbledon: list[Hit], cache: EmbeddingCache
) -> None:
    a, _ = answerer(wimbledon, ExtractiveGenerator(cache.vectors), cache, judge="evidence")
    ans = a.answer("Who won the 2022 Wimbledon women's singles?")
    assert not ans.fallback and "answers it" in ans.confidence.reason


def test_the_evidence_check_can_be_turned_off(wimbledon: list[Hit], cache: EmbeddingCache) -> None:
    gen = ScriptedGenerator("Elena Rybakina won the final [1].")
    a, _ = answerer(wimbledon, gen, cache, evidence_check=False)
    ans = a.answer("Who won the 2018 Wimbledon women's singles?")
    assert len(gen.calls) == 1 and not ans.fallback


def test_a_generator_saying_the_context_does_not_answer_becomes_the_fallback(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    gen = ScriptedGenerator(f"Sorry. {FALLBACK_ANSWER}")
    a, _ = answerer(five_hits, gen, cache)
    ans = a.answer("Which gate of an LSTM decides how much of the memory cell is kept?")
    assert len(gen.calls) == 1  # the evidence was there; the model declined anyway
    assert ans.fallback and ans.text.startswith(FALLBACK_ANSWER) and ans.citations == []
    assert ans.confidence.level == "low"
    assert ans.confidence.reason == "the generator found no answer in the passages"
    assert "Related passages" in ans.text


def test_a_sentence_whose_citations_are_all_unsupported_is_marked(
    five_hits: list[Hit], cache: EmbeddingCache
) -> None:
    gen = ScriptedGenerator(
        "The forget gate decides how much of the memory cell is kept [4]. "
        "The forget gate was invented in 1850 by Ada Lovelace [2]."
    )
    a, _ = answerer(five_hits, gen, cache)
    ans = a.answer("Which gate of an LSTM decides how much of the memory cell is kept?")
    assert [c.supported for c in ans.citations] == [True, False]
    assert ans.unsupported_sentences == ["The forget gate was invented in 1850 by Ada Lovelace"]
    removed, _ = answerer(five_hits, gen, cache, unsupported_citations="remove")
    ans = removed.answer("Which gate of an LSTM decides how much of the memory cell is kept?")
    assert "[2]" not in ans.text and [c.number for c in ans.citations] == [4]


def test_an_llm_citation_the_reader_does_not_find_supported_is_flagged(
    wimbledon: list[Hit], cache: EmbeddingCache
) -> None:
    """The LLM path: the reader reads each cited sentence with its passage."""
    claim = "The 2022 championships were played on clay courts in Paris [2]."
    gen = ScriptedGenerator(f"Elena Rybakina won the 2022 final [1]. {claim}")
    a, _ = answerer(wimbledon, gen, cache)
    ans = a.answer("Who won the 2022 Wimbledon women's singles?")
    by_number = {c.number: c for c in ans.citations}
    assert by_number[1].supported
    assert not by_number[2].supported
    assert ans.unsupported_sentences == [
        "The 2022 championships were played on clay courts in Paris"
    ]
