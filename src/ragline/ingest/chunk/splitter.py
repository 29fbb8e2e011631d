"""Cutting a span of the body into pieces that fit a token budget, at the most
natural cut points that fit (see :mod:`.cuts` for where a span may be cut)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragline.ingest.spans import lstrip_span, rstrip_span

CountTokens = Callable[[str], int]


def count_many(count_tokens: CountTokens, texts: Sequence[str]) -> list[int]:
    """Token counts for many texts in one call when the counter can batch
    (``TokenCounter.count_many``), else one call each."""
    if not texts:
        return []
    batch = getattr(count_tokens, "count_many", None)
    if callable(batch):
        counts = batch(list(texts))
        return [int(n) for n in counts]
    return [count_tokens(t) for t in texts]


@dataclass(slots=True)
class Splitter:
    """Cuts an oversized span into pieces that fit a token budget.

    Only cut points within ``chars_per_token * budget`` characters are tried, so
    splitting a huge paragraph costs O(length) tokenizer work, not O(length²);
    pieces cut short by that window are packed together again afterwards.
    """

    body: str
    count: CountTokens
    chars_per_token: int = 12

    def fits(self, text: str, budget: int) -> tuple[bool, int]:
        n = self.count(text)
        return n <= budget, n

    def split(
        self,
        start: int,
        end: int,
        levels: Sequence[Sequence[int]],
        budget: int,
        *,
        prefix: str = "",
        hard_cut: bool = True,
        first_budget: int = 0,
        prefix_first: bool = False,
    ) -> list[tuple[int, int, int, str]]:
        """Greedy pieces ``(start, end, tokens, prefix)``.

        Each piece ends at the furthest cut point of the best ``levels`` entry
        (positions where a piece may start, most natural first) whose prefix
        fits; with none, a hard character cut (or, without ``hard_cut``, the
        first cut point, leaving one oversized piece). ``prefix`` is prepended
        to every piece after the first one (a table's header rows, a code block's
        opening fence), and to the first one too with ``prefix_first``.

        With ``first_budget`` the first piece must fit that smaller budget at a
        natural cut point, or the result is empty: the caller wants to fill the
        room left in a chunk, but never by a hard cut.
        """
        body = self.body
        pieces: list[tuple[int, int, int, str]] = []
        pos = start
        if first_budget > 0:
            window = min(end, pos + self.chars_per_token * first_budget)
            cut, cut_tokens = self._furthest_cut(pos, window, levels, first_budget, "")
            if cut is None:
                return []
            pieces.append((pos, rstrip_span(body, pos, cut), cut_tokens, ""))
            pos = lstrip_span(body, cut, end)
        while True:
            head = prefix if pos != start or prefix_first else ""
            window = min(end, pos + self.chars_per_token * budget)
            if window == end:
                ok, n = self.fits(head + body[pos:end], budget)
                if ok:
                    pieces.append((pos, end, n, head))
                    return pieces
            cut, cut_tokens = self._furthest_cut(pos, window, levels, budget, head)
            if cut is None:
                if hard_cut:
                    cut, cut_tokens = self._char_cut(pos, window, budget, head)
                else:
                    cut = _first_after(levels, pos, end)
                    if cut is None:
                        n = self.count(head + body[pos:end])
                        pieces.append((pos, end, n, head))
                        return pieces
                    cut_tokens = self.count(head + body[pos : rstrip_span(body, pos, cut)])
            pieces.append((pos, rstrip_span(body, pos, cut), cut_tokens, head))
            pos = lstrip_span(body, cut, end)
            if pos >= end:
                return pieces

    def _furthest_cut(
        self, pos: int, window: int, levels: Sequence[Sequence[int]], budget: int, head: str
    ) -> tuple[int | None, int]:
        body = self.body
        for cuts in levels:
            lo = bisect_right(cuts, pos)
            hi = bisect_right(cuts, window)
            if lo >= hi:
                continue
            ok, n = self.fits(head + body[pos : rstrip_span(body, pos, cuts[lo])], budget)
            if not ok:
                continue
            best, best_n = lo, n
            lo += 1
            hi -= 1
            while lo <= hi:  # largest index whose piece still fits
                mid = (lo + hi) // 2
                ok, n = self.fits(head + body[pos : rstrip_span(body, pos, cuts[mid])], budget)
                if ok:
                    best, best_n = mid, n
                    lo = mid + 1
                else:
                    hi = mid - 1
            return cuts[best], best_n
        return None, 0

    def _char_cut(self, pos: int, window: int, budget: int, head: str) -> tuple[int, int]:
        best = pos + 1
        best_n = self.count(head + self.body[pos:best])
        lo, hi = pos + 2, window
        while lo <= hi:
            mid = (lo + hi) // 2
            ok, n = self.fits(head + self.body[pos:mid], budget)
            if ok:
                best, best_n = mid, n
                lo = mid + 1
            else:
                hi = mid - 1
        return best, best_n

    def earliest_fit(self, starts: list[int], end: int, room: int) -> tuple[int, int] | None:
        """The earliest start whose text up to ``end`` fits in ``room`` tokens."""
        if not starts:
            return None
        body = self.body
        ok, n = self.fits(body[starts[-1] : end], room)
        if not ok:
            return None
        best, best_n = len(starts) - 1, n
        lo, hi = 0, len(starts) - 2
        while lo <= hi:
            mid = (lo + hi) // 2
            ok, n = self.fits(body[starts[mid] : end], room)
            if ok:
                best, best_n = mid, n
                hi = mid - 1
            else:
                lo = mid + 1
        return starts[best], best_n


def _first_after(levels: Sequence[Sequence[int]], pos: int, end: int) -> int | None:
    firsts = [c[i] for c in levels if (i := bisect_right(c, pos)) < len(c) and c[i] < end]
    return min(firsts) if firsts else None
