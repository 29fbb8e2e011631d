"""Neighbour expansion: give each hit the chunks around it in its document.

A chunk cut at a boundary often lacks the sentence before or after that makes it
answerable; adding its neighbours (within a token budget) restores that context
without making chunks larger for every query. Pure: the caller passes ``fetch``,
usually ``store.chunks_by_index``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ragline.types import Chunk, Hit

#: ``fetch(doc_id, indices)`` → the document's chunks at those positions (any order;
#: positions past either end of the document are simply absent).
FetchChunks = Callable[[str, list[int]], Sequence[Chunk]]


def expand_neighbours(
    hits: list[Hit],
    fetch: FetchChunks,
    *,
    window: int,
    token_budget: int,
) -> list[Hit]:
    """Hits with up to ``window`` chunks before and after each, in document order.

    Output order: for each hit in rank order, its previous neighbours (ascending
    ``chunk_index``), the hit itself, then its next neighbours — so each group
    reads as continuous text. A neighbour is ``Hit(chunk, score=parent.score,
    rank=parent.rank, expanded_from=parent.chunk.id)``: it shares its parent's
    rank, so ranks 1..n still name the retrieved hits.

    Better-ranked hits expand first, nearest neighbours first (−1, +1, −2, +2, …).
    Chunks already present (as a hit or an earlier neighbour) are skipped. Adding
    stops for good at the first neighbour whose tokens would take the total of
    added neighbour tokens past ``token_budget``, so context never has holes
    (no ±2 without ±1). ``fetch`` is called once per document. ``window=0``
    returns the hits unchanged.
    """
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    if token_budget < 0:
        raise ValueError(f"token_budget must be >= 0, got {token_budget}")
    if window == 0 or not hits:
        return list(hits)

    present_ids = {h.chunk.id for h in hits}
    hit_positions: dict[str, set[int]] = {}
    for h in hits:
        hit_positions.setdefault(h.chunk.doc_id, set()).add(h.chunk.chunk_index)

    wanted: dict[str, set[int]] = {}
    for h in hits:
        c = h.chunk
        around = range(max(0, c.chunk_index - window), c.chunk_index + window + 1)
        wanted.setdefault(c.doc_id, set()).update(
            i for i in around if i not in hit_positions[c.doc_id]
        )

    by_position: dict[tuple[str, int], Chunk] = {}
    for doc_id, indices in wanted.items():
        if not indices:
            continue
        for chunk in fetch(doc_id, sorted(indices)):
            by_position[(doc_id, chunk.chunk_index)] = chunk

    out: list[Hit] = []
    used = 0
    exhausted = False
    for h in hits:
        before: list[Hit] = []
        after: list[Hit] = []
        if not exhausted:
            for offset in _nearest_first(window):
                idx = h.chunk.chunk_index + offset
                neighbour = by_position.get((h.chunk.doc_id, idx))
                if neighbour is None or neighbour.id in present_ids:
                    continue
                if used + neighbour.token_count > token_budget:
                    exhausted = True
                    break
                used += neighbour.token_count
                present_ids.add(neighbour.id)
                added = Hit(
                    chunk=neighbour,
                    score=h.score,
                    rank=h.rank,
                    expanded_from=h.chunk.id,
                )
                (before if offset < 0 else after).append(added)
        before.sort(key=lambda n: n.chunk.chunk_index)
        after.sort(key=lambda n: n.chunk.chunk_index)
        out += [*before, h, *after]
    return out


def _nearest_first(window: int) -> list[int]:
    """Offsets −1, +1, −2, +2, … ±window."""
    return [o for d in range(1, window + 1) for o in (-d, d)]
