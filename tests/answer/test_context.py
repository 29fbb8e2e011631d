"""Context assembly: numbering, rank order, neighbour merging, the token budget."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ragline.answer.context import block_label, build_context, cut_to_budget, merge_chunks
from ragline.embed.tokenizer import TokenCounter
from ragline.types import Chunk, Hit

BODY = (
    "Warm-up raises the learning rate over the first steps. "
    "Cosine decay then lowers it smoothly towards zero. "
    "Restarts jump the rate back up to escape sharp minima. "
    "A final constant phase polishes the weights."
)


def doc_chunks(make_chunk: Callable[..., Chunk], overlap: int = 12) -> list[Chunk]:
    """BODY cut into three chunks that overlap by ``overlap`` characters, as the
    section chunker's token overlap does."""
    cuts = [0, 55, 106, len(BODY)]
    out = []
    for i in range(3):
        start = max(0, cuts[i] - (overlap if i else 0))
        out.append(
            make_chunk(
                f"s{i}",
                BODY[start : cuts[i + 1]],
                doc_id="sched",
                chunk_index=i,
                start_char=start,
                title="Schedules",
                section="Warm-up",
            )
        )
    return out


def test_blocks_are_numbered_in_rank_order_with_labels(
    five_hits: list[Hit], count_tokens: TokenCounter
) -> None:
    ctx = build_context(five_hits, count_tokens, 2000)
    assert [b.number for b in ctx.blocks] == [1, 2, 3, 4, 5]
    assert [b.hit.chunk.id for b in ctx.blocks] == [h.chunk.id for h in five_hits]
    assert ctx.render().startswith("[1] Dropout > Regularization\nDropout zeroes")
    assert "\n\n[2] Optimizers > Momentum\n" in ctx.render()
    assert not ctx.truncated


def test_expanded_neighbours_merge_into_their_hit_without_the_overlap(
    make_chunk: Callable[..., Chunk], make_hit: Callable[..., Hit], count_tokens: TokenCounter
) -> None:
    a, b, c = doc_chunks(make_chunk)
    other = make_chunk("x", "GPUs are fast at matrix products.", doc_id="hw", title="Hardware")
    # The order expand_neighbours produces: [prev, hit, next] per hit, in rank order.
    hits = [
        make_hit(a, 0.7, 1, expanded_from="s1", vector_score=None),
        make_hit(b, 0.7, 1),
        make_hit(c, 0.7, 1, expanded_from="s1", vector_score=None),
        make_hit(other, 0.4, 2),
    ]
    ctx = build_context(hits, count_tokens, 2000)
    assert len(ctx.blocks) == 2
    first = ctx.blocks[0]
    assert first.hit.chunk.id == "s1"  # the block is the retrieved hit's
    assert first.text == BODY  # continuous, no repeated overlap
    assert first.source().chunk_ids == ("s0", "s1", "s2")
    # A span of the merged text maps back into the right chunk's own text.
    pos = BODY.index("Restarts")
    chunk_, s, e = first.locate(pos, pos + 8)
    assert chunk_.id == "s2" and chunk_.text[s:e] == "Restarts"


def test_merge_keeps_non_adjacent_chunks_apart(make_chunk: Callable[..., Chunk]) -> None:
    a = make_chunk("a", "First part.", chunk_index=0, start_char=0)
    b = make_chunk("b", "Much later part.", chunk_index=5, start_char=500)
    text, parts = merge_chunks([a, b])
    assert text == "First part.\n\nMuch later part."
    assert [p.offset for p in parts] == [0, 13]


@pytest.mark.parametrize("budget", [40, 60, 90, 130])
def test_budget_is_measured_with_the_tokenizer_and_cut_at_sentence_ends(
    budget: int,
    make_chunk: Callable[..., Chunk],
    make_hit: Callable[..., Hit],
    count_tokens: TokenCounter,
) -> None:
    hits = [
        make_hit(make_chunk(f"c{i}", BODY, doc_id=f"d{i}", title=f"Doc {i}"), 0.5, i + 1)
        for i in range(4)
    ]
    ctx = build_context(hits, count_tokens, budget)
    assert count_tokens(ctx.render()) <= budget
    assert ctx.token_count == count_tokens(ctx.render())
    assert ctx.truncated
    for block in ctx.blocks:
        assert block.text.endswith(".")  # never mid-sentence
        assert BODY.startswith(block.text)


def test_cut_to_budget_never_cuts_inside_a_sentence(count_tokens: TokenCounter) -> None:
    ends = [i + 1 for i, ch in enumerate(BODY) if ch == "."]
    fitting = [BODY[:e] for e in ends if count_tokens(BODY[:e]) <= 20]
    assert fitting  # the test needs a budget that fits at least one sentence
    assert cut_to_budget(BODY, count_tokens, 20) == fitting[-1]
    assert cut_to_budget(BODY, count_tokens, 3) == ""


def test_label_is_title_and_section(make_chunk: Callable[..., Chunk]) -> None:
    assert block_label(make_chunk("a", "x", title="Guide", section="Install")) == "Guide > Install"
    assert block_label(make_chunk("a", "x", title="Guide")) == "Guide"
