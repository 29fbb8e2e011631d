"""The distractor protocol: evidence removed from the results, gold answers matched."""

from __future__ import annotations

from typing import Any

from ragline.eval.distractor import DEPTH, contains_answer, in_expected, without
from ragline.types import Chunk, Hit, SearchResult


def _hit(i: int, doc: str) -> Hit:
    chunk = Chunk(
        id=f"c{i}",
        doc_id=doc,
        tenant="default",
        source=f"/book/{doc}.md",
        title="T",
        chapter="",
        section="S",
        heading_path=("T",),
        url="",
        anchor="",
        chunk_index=0,
        start_char=0,
        end_char=1,
        token_count=1,
        word_count=1,
        has_code=False,
        has_equations=False,
        content_hash=str(i),
        created_at="",
        text="x",
    )
    return Hit(chunk=chunk, score=1.0 - i / 100, rank=i + 1)


class Search:
    def __init__(self, hits: list[Hit]) -> None:
        self.hits = hits
        self.asked: list[dict[str, Any]] = []

    def __call__(self, query: str, **options: Any) -> SearchResult:
        self.asked.append(options)
        k = options.get("top_k") or 10
        return SearchResult(query, "hybrid", self.hits[:k], {"total": 1.0})


def test_dropped_hits_are_refilled_from_deeper_results_and_renumbered() -> None:
    hits = [_hit(i, "gold" if i in (0, 2) else f"d{i}") for i in range(12)]
    search = Search(hits)
    wrapped = without(search, lambda h: h.chunk.doc_id == "gold", top_k=4)
    result = wrapped("q", mode="hybrid")
    assert search.asked == [{"mode": "hybrid", "top_k": 4 * DEPTH}]
    assert [h.chunk.id for h in result.hits] == ["c1", "c3", "c4", "c5"]
    assert [h.rank for h in result.hits] == [1, 2, 3, 4]
    assert wrapped("q", top_k=2).hits[1].chunk.id == "c3"


def test_gold_answers_match_whole_words_ignoring_case_and_punctuation() -> None:
    assert contains_answer("It was released in 2017 [1].", ["2017"])
    assert not contains_answer("It was released in 20170.", ["2017"])
    assert contains_answer("The Visual-Geometry group built it.", ["visual geometry group"])
    assert not contains_answer("anything", ["", "  "])


def test_expected_sections_match_by_file_suffix_and_normalised_name() -> None:
    expected = [{"file": "chapter_x/a.md", "sections": ["[**Training**]", "Summary"]}]
    assert in_expected("/data/d2l/chapter_x/a.md", "Training", expected)
    assert not in_expected("/data/d2l/chapter_x/a.md", "Model", expected)
    assert not in_expected("/data/d2l/chapter_y/a.md", "Summary", expected)
