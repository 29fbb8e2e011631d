"""Neighbour expansion: give each hit the chunks around it in its document.

A chunk cut at a boundary often lacks the sentence before or after that makes it
answerable; adding its neighbours (within a token budget) restores that context
without making chunks larger for every query. Pure: the caller passes ``fetch``,
usually ``store.chunks_by_index``.

Graph expansion (seed 001's optional step, :func:`expand_graph`) adds, besides
the neighbours, the rest of the hit's section (the chunks that reach its
document, Chunk→Document←Chunk, and share its section), in one query on the
graph store and through the same neighbour lookup on every other store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

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

    def neighbours(h: Hit) -> Iterator[Chunk]:
        for offset in _nearest_first(window):
            chunk = by_position.get((h.chunk.doc_id, h.chunk.chunk_index + offset))
            if chunk is not None:
                yield chunk

    return _attach(hits, neighbours, token_budget)


def _attach(
    hits: list[Hit], candidates: Callable[[Hit], Iterable[Chunk]], token_budget: int
) -> list[Hit]:
    """Each hit with the ``candidates`` it gets, its group in document order.

    The budget rule both expansions share, so they stay alike: better-ranked hits
    first, each hit's candidates in the order given (nearest first), chunks already
    present skipped, and adding stops for good at the first chunk whose tokens would
    take the total added past ``token_budget`` (so context never has holes). An
    added chunk is a ``Hit`` with its parent's score and rank.
    """
    present_ids = {h.chunk.id for h in hits}
    out: list[Hit] = []
    used = 0
    exhausted = False
    for h in hits:
        before: list[Hit] = []
        after: list[Hit] = []
        for chunk in () if exhausted else candidates(h):
            if chunk.id in present_ids:
                continue
            if used + chunk.token_count > token_budget:
                exhausted = True
                break
            used += chunk.token_count
            present_ids.add(chunk.id)
            added = Hit(chunk=chunk, score=h.score, rank=h.rank, expanded_from=h.chunk.id)
            (before if chunk.chunk_index < h.chunk.chunk_index else after).append(added)
        before.sort(key=lambda n: n.chunk.chunk_index)
        after.sort(key=lambda n: n.chunk.chunk_index)
        out += [*before, h, *after]
    return out


def _nearest_first(window: int) -> list[int]:
    """Offsets −1, +1, −2, +2, … ±window."""
    return [o for d in range(1, window + 1) for o in (-d, d)]


# ------------------------------------------------------------- graph expansion


def related_by_index(
    hits: Sequence[Hit], fetch: FetchChunks, *, window: int, same_section: bool, span: int
) -> dict[str, list[Chunk]]:
    """:attr:`StoreAbilities.related_chunks` for any store, from its neighbour
    lookup: one ``fetch`` per document of every position within reach of a hit."""
    reach = max(window, span if same_section else 0)
    wanted: dict[str, set[int]] = {}
    for h in hits:
        c = h.chunk
        wanted.setdefault(c.doc_id, set()).update(
            range(max(0, c.chunk_index - reach), c.chunk_index + reach + 1)
        )
    fetched = {doc: list(fetch(doc, sorted(idx))) for doc, idx in wanted.items() if reach > 0}
    out: dict[str, list[Chunk]] = {}
    for h in hits:
        c = h.chunk
        out[c.id] = [
            n
            for n in fetched.get(c.doc_id, [])
            if n.id != c.id and abs(n.chunk_index - c.chunk_index) <= reach
        ]
    return out


def context_around(
    hit: Chunk, related: Sequence[Chunk], *, window: int, same_section: bool
) -> list[Chunk]:
    """The chunks graph expansion adds to one hit, nearest first (−1, +1, −2, …):
    its neighbours up to ``window`` away, and with ``same_section`` the unbroken run
    of chunks on either side that share the hit's (non-empty) section. Pure: every
    store gets the same answer from the same chunks."""
    by_index = {c.chunk_index: c for c in related if c.doc_id == hit.doc_id and c.id != hit.id}
    chosen = {i for i in by_index if 0 < abs(i - hit.chunk_index) <= window}
    if same_section and hit.section:
        for step in (-1, 1):
            i = hit.chunk_index + step
            while i in by_index and by_index[i].section == hit.section:
                chosen.add(i)
                i += step
    order = sorted(chosen, key=lambda i: (abs(i - hit.chunk_index), i - hit.chunk_index))
    return [by_index[i] for i in order]


def expand_graph(
    hits: list[Hit],
    related: Mapping[str, Sequence[Chunk]],
    *,
    window: int,
    same_section: bool,
    token_budget: int,
) -> list[Hit]:
    """Hits with the chunks :func:`context_around` gives each, within the budget.

    The same rules as :func:`expand_neighbours` (which this equals when
    ``same_section`` is off): better-ranked hits first, nearest chunks first,
    chunks already present skipped, adding stops for good at the first chunk
    that would pass ``token_budget``; each hit's group reads in document order.
    """
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    if token_budget < 0:
        raise ValueError(f"token_budget must be >= 0, got {token_budget}")
    return _attach(
        hits,
        lambda h: context_around(
            h.chunk, related.get(h.chunk.id, ()), window=window, same_section=same_section
        ),
        token_budget,
    )
