"""Multi-query rewriting: reading the LLM's phrasings, and fusing their searches."""

from __future__ import annotations

import pytest

from ragline.retrieve.multiquery import (
    ChatExpander,
    expansion_messages,
    fuse_results,
    parse_phrasings,
)
from ragline.types import Chunk, Hit, SearchResult

Q = "How do I clean the kettle?"


def test_parse_strips_markers_and_quotes_and_keeps_order() -> None:
    reply = (
        "Here are 3 ways to ask:\n"
        "1. How can a kettle be descaled?\n"
        "2) 'Removing limescale from a kettle'\n"
        "- Kettle cleaning with vinegar\n"
    )
    assert parse_phrasings(reply, Q, 3, 300) == [
        "How can a kettle be descaled?",
        "Removing limescale from a kettle",
        "Kettle cleaning with vinegar",
    ]


def test_parse_drops_empty_repeated_overlong_lines_and_the_question() -> None:
    reply = "\n".join(
        [
            "",
            "   ",
            "how do I clean the kettle",  # the question again (case, punctuation)
            "Descale a kettle",
            "descale a kettle!",  # a repeat
            "x" * 301,  # rambling
            "Query 3: Kettle limescale removal",
            "-",  # a marker alone
        ]
    )
    assert parse_phrasings(reply, Q, 5, 300) == ["Descale a kettle", "Kettle limescale removal"]


def test_parse_caps_the_count_and_keeps_numbers_that_are_not_markers() -> None:
    reply = "1.5 litres kettle cleaning\nuseState: what is it\nthird\nfourth"
    assert parse_phrasings(reply, Q, 2, 300) == [
        "1.5 litres kettle cleaning",
        "useState: what is it",
    ]
    assert parse_phrasings("a\nb", Q, 1, 300) == ["a"]


def test_expander_asks_for_n_lines_and_adds_them_after_the_question() -> None:
    seen: list[list[dict[str, str]]] = []

    def complete(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return "Descale a kettle\nKettle limescale removal\nextra line"

    e = ChatExpander(complete, n=2, max_chars=100).expand(Q)
    assert e.method == "llm" and e.error == ""
    assert e.queries == (Q, "Descale a kettle", "Kettle limescale removal")
    assert e.phrasings == ("Descale a kettle", "Kettle limescale removal")
    assert seen == [expansion_messages(Q, 2)]
    assert "2 different ways" in seen[0][0]["content"] and seen[0][1]["content"] == Q


def test_expander_failing_or_empty_searches_the_question_alone() -> None:
    def broken(messages: list[dict[str, str]]) -> str:
        raise TimeoutError("read timed out")

    failed = ChatExpander(broken).expand(Q)
    assert failed.queries == (Q,) and failed.method == "failed"
    assert "TimeoutError" in failed.error and "timed out" in failed.error
    empty = ChatExpander(lambda m: "\n" + Q + "\n").expand(Q)
    assert empty.queries == (Q,) and empty.method == "empty"


def _chunk(cid: str, doc: str = "d", index: int = 0) -> Chunk:
    return Chunk(
        id=cid,
        doc_id=doc,
        tenant="default",
        source=f"/docs/{doc}.md",
        title=doc,
        chapter="",
        section=doc,
        heading_path=(doc,),
        url="",
        anchor="",
        chunk_index=index,
        start_char=0,
        end_char=4,
        token_count=1,
        word_count=1,
        has_code=False,
        has_equations=False,
        content_hash=cid,
        created_at="2024-01-01T00:00:00Z",
        text=cid,
    )


def _result(query: str, hits: list[Hit], ms: float = 1.0) -> SearchResult:
    return SearchResult(query, "hybrid", hits, {"total": ms}, "en")


def test_fusion_ranks_by_rrf_and_keeps_the_question_s_cosines_only() -> None:
    own = _result("q", [Hit(_chunk("a"), 0.9, 1, 0.8, 3.0), Hit(_chunk("b"), 0.5, 2, 0.6, 1.0)])
    alt = _result("p", [Hit(_chunk("c"), 0.9, 1, 0.9, 5.0), Hit(_chunk("a"), 0.4, 2, 0.3, 2.0)])
    fused = fuse_results([own, alt], top_k=2, k=60)
    assert [h.chunk.id for h in fused.hits] == [
        "a",
        "c",
    ]  # a: in both lists; c (1st in one) beats b (2nd)
    assert [h.rank for h in fused.hits] == [1, 2]
    a, c = fused.hits
    assert a.score == pytest.approx(1 / 61 + 1 / 62)
    assert a.vector_score == 0.8 and a.keyword_score == 3.0  # the question's own scores
    assert c.vector_score is None and c.keyword_score == 5.0  # a paraphrase's cosine dropped
    assert fused.query == "q" and fused.timings_ms == {"total": 2.0}
    assert fuse_results([own], 1) is own


def test_fusion_brings_back_each_kept_hit_s_neighbours_once() -> None:
    hit_b = Hit(_chunk("b", "doc", 5), 0.9, 1, 0.8)
    own = _result(
        "q",
        [
            Hit(_chunk("b4", "doc", 4), 0.9, 1, expanded_from="b"),
            hit_b,
            Hit(_chunk("b6", "doc", 6), 0.9, 1, expanded_from="b"),
        ],
    )
    hit_x = Hit(_chunk("x", "other", 0), 0.9, 1, 0.7)
    alt = _result(
        "p",
        [hit_x, Hit(_chunk("x1", "other", 1), 0.9, 1, expanded_from="x"), hit_b],
    )
    fused = fuse_results([own, alt], top_k=5)
    ids = [h.chunk.id for h in fused.hits]
    assert ids == ["b4", "b", "b6", "x", "x1"]
    assert [h.rank for h in fused.hits] == [1, 1, 1, 2, 2]
    assert fused.hits[0].score == fused.hits[1].score  # a neighbour shares its hit's score
    assert fuse_results([own, alt], top_k=1).hits[1].chunk.id == "b"
    assert len(fuse_results([own, alt], top_k=1).hits) == 3
    with pytest.raises(ValueError, match="at least one"):
        fuse_results([], 3)
