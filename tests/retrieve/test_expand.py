"""Neighbour expansion with hand-built documents."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from ragline.retrieve.expand import (
    context_around,
    expand_graph,
    expand_neighbours,
    related_by_index,
)
from ragline.types import Chunk, Hit

ChunkFactory = Callable[..., Chunk]


class FakeDocs:
    """Documents as lists of chunks, with a fetch that records its calls."""

    def __init__(self, make_chunk: ChunkFactory, sizes: dict[str, list[int]]) -> None:
        self.docs = {
            doc: [
                make_chunk(f"{doc}-{i}", doc_id=doc, chunk_index=i, token_count=t)
                for i, t in enumerate(tokens)
            ]
            for doc, tokens in sizes.items()
        }
        self.calls: list[tuple[str, list[int]]] = []

    def fetch(self, doc_id: str, indices: list[int]) -> Sequence[Chunk]:
        self.calls.append((doc_id, list(indices)))
        chunks = self.docs[doc_id]
        # Reverse order on purpose: callers must not rely on fetch's order.
        return [chunks[i] for i in reversed(indices) if 0 <= i < len(chunks)]

    def hit(self, doc: str, index: int, rank: int, score: float = 1.0) -> Hit:
        return Hit(chunk=self.docs[doc][index], score=score, rank=rank, vector_score=0.5)


def layout(hits: list[Hit]) -> list[tuple[str, str | None]]:
    return [(h.chunk.id, h.expanded_from) for h in hits]


def test_window_zero_returns_hits_unchanged(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"d": [10] * 5})
    hits = [docs.hit("d", 2, 1), docs.hit("d", 0, 2)]
    out = expand_neighbours(hits, docs.fetch, window=0, token_budget=1000)
    assert out == hits
    assert all(a is b for a, b in zip(out, hits, strict=True))
    assert docs.calls == []
    assert expand_neighbours([], docs.fetch, window=2, token_budget=1000) == []
    assert docs.calls == []


def test_neighbours_in_document_order_around_parent(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"d": [10] * 7})
    parent = docs.hit("d", 3, rank=1, score=0.8)
    out = expand_neighbours([parent], docs.fetch, window=2, token_budget=1000)
    assert layout(out) == [
        ("d-1", "d-3"),
        ("d-2", "d-3"),
        ("d-3", None),
        ("d-4", "d-3"),
        ("d-5", "d-3"),
    ]
    assert out[2] is parent
    for n in out[:2] + out[3:]:
        assert (n.score, n.rank) == (0.8, 1)
        assert n.vector_score is None and n.keyword_score is None
    assert docs.calls == [("d", [1, 2, 4, 5])]


def test_one_fetch_per_document_and_edges(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"a": [10] * 3, "b": [10] * 4})
    hits = [docs.hit("a", 0, 1), docs.hit("b", 3, 2), docs.hit("a", 2, 3)]
    out = expand_neighbours(hits, docs.fetch, window=1, token_budget=1000)
    # Past-the-end positions are asked for (only the store knows the length).
    assert sorted(docs.calls) == [("a", [1, 3]), ("b", [2, 4])]
    assert layout(out) == [
        ("a-0", None),
        ("a-1", "a-0"),
        ("b-2", "b-3"),
        ("b-3", None),
        ("a-2", None),  # a-1 already added for the better-ranked a-0
    ]


def test_adjacent_hits_are_not_duplicated(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"d": [10] * 6})
    hits = [docs.hit("d", 2, 1), docs.hit("d", 3, 2)]
    out = expand_neighbours(hits, docs.fetch, window=1, token_budget=1000)
    assert layout(out) == [("d-1", "d-2"), ("d-2", None), ("d-3", None), ("d-4", "d-3")]
    assert docs.calls == [("d", [1, 4])]
    assert len({h.chunk.id for h in out}) == len(out)


def test_token_budget_stops_expansion(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"d": [10, 10, 10, 10, 10, 10], "e": [5, 5, 5]})
    hits = [docs.hit("d", 2, 1), docs.hit("e", 1, 2)]
    # Nearest first: d-1 (10), d-3 (20), then d-0 would make 30 > 25 → stop, for good:
    # e-1's 5-token neighbours would fit but are not added (no holes, best hits first).
    out = expand_neighbours(hits, docs.fetch, window=2, token_budget=25)
    assert layout(out) == [("d-1", "d-2"), ("d-2", None), ("d-3", "d-2"), ("e-1", None)]
    # A neighbour that lands exactly on the budget is still added.
    exact = expand_neighbours(hits, docs.fetch, window=1, token_budget=30)
    assert layout(exact) == [
        ("d-1", "d-2"),
        ("d-2", None),
        ("d-3", "d-2"),
        ("e-0", "e-1"),
        ("e-1", None),
        ("e-2", "e-1"),
    ]
    short = expand_neighbours(hits, docs.fetch, window=1, token_budget=29)
    assert [cid for cid, _ in layout(short)] == ["d-1", "d-2", "d-3", "e-0", "e-1"]


def test_zero_budget_adds_nothing(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"d": [10] * 5})
    hits = [docs.hit("d", 2, 1)]
    assert layout(expand_neighbours(hits, docs.fetch, window=2, token_budget=0)) == [("d-2", None)]


def test_hits_are_not_mutated(make_chunk: ChunkFactory) -> None:
    docs = FakeDocs(make_chunk, {"d": [10] * 5})
    hits = [docs.hit("d", 2, 1)]
    before = [(h.score, h.rank, h.expanded_from) for h in hits]
    expand_neighbours(hits, docs.fetch, window=1, token_budget=100)
    assert [(h.score, h.rank, h.expanded_from) for h in hits] == before
    assert len(hits) == 1


@pytest.mark.parametrize(
    ("window", "budget", "message"),
    [(-1, 10, "window must be >= 0"), (1, -5, "token_budget must be >= 0")],
)
def test_rejects_negative_arguments(
    make_chunk: ChunkFactory, window: int, budget: int, message: str
) -> None:
    docs = FakeDocs(make_chunk, {"d": [10]})
    with pytest.raises(ValueError, match=message):
        expand_neighbours([docs.hit("d", 0, 1)], docs.fetch, window=window, token_budget=budget)


# ------------------------------------------------------------- graph expansion


def _graph(docs: FakeDocs, hits: list[Hit], window: int, section: bool, budget: int) -> list[Hit]:
    related = related_by_index(hits, docs.fetch, window=window, same_section=section, span=4)
    return expand_graph(hits, related, window=window, same_section=section, token_budget=budget)


@pytest.mark.parametrize("window", [1, 2, 3])
@pytest.mark.parametrize("budget", [0, 15, 25, 1000])
def test_graph_expansion_without_sections_equals_neighbour_expansion(
    make_chunk: ChunkFactory, window: int, budget: int
) -> None:
    docs = FakeDocs(make_chunk, {"d": [10, 7, 12, 9, 10, 11, 10], "e": [5, 6, 7]})
    hits = [docs.hit("d", 3, 1), docs.hit("e", 0, 2), docs.hit("d", 5, 3)]
    expected = expand_neighbours(hits, docs.fetch, window=window, token_budget=budget)
    assert layout(_graph(docs, hits, window, False, budget)) == layout(expected)


def test_section_expansion_adds_the_unbroken_run_of_the_hits_section(
    make_chunk: ChunkFactory,
) -> None:
    sections = ["Intro", "Loss", "Loss", "Loss", "Other", "Loss", "Loss"]
    docs = FakeDocs(make_chunk, {"d": [10] * 7})
    docs.docs["d"] = [
        make_chunk(f"d-{i}", doc_id="d", chunk_index=i, token_count=10, section=s)
        for i, s in enumerate(sections)
    ]
    hits = [docs.hit("d", 2, 1)]
    # window 0: only the section run (1..3), never the later "Loss" chunks past "Other"
    assert layout(_graph(docs, hits, 0, True, 1000)) == [
        ("d-1", "d-2"),
        ("d-2", None),
        ("d-3", "d-2"),
    ]
    # window 2 adds neighbours past the section as well, nearest first (−1, +1, −2)
    # until the budget stops it before +2
    assert [cid for cid, _ in layout(_graph(docs, hits, 2, True, 30))] == [
        "d-0",
        "d-1",
        "d-2",
        "d-3",
    ]
    # an empty section is no section
    docs.docs["d"] = [
        make_chunk(f"d-{i}", doc_id="d", chunk_index=i, token_count=10, section="")
        for i in range(7)
    ]
    assert layout(_graph(docs, [docs.hit("d", 2, 1)], 0, True, 1000)) == [("d-2", None)]


def test_context_around_orders_nearest_first(make_chunk: ChunkFactory) -> None:
    chunks = [make_chunk(f"c{i}", doc_id="d", chunk_index=i, section="S") for i in range(6)]
    order = context_around(chunks[3], chunks, window=2, same_section=False)
    assert [c.id for c in order] == ["c2", "c4", "c1", "c5"]
    order = context_around(chunks[3], chunks, window=0, same_section=True)
    assert [c.id for c in order] == ["c2", "c4", "c1", "c5", "c0"]
