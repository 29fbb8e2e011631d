"""The distractor protocol: ask with the evidence taken out of the index.

A question whose answer is not indexed must get the fallback. To measure that
on real data without re-indexing per question, the search is wrapped so that
the hits of the evidence (a claim's evidence documents, a question's expected
sections) are dropped and the ranking is refilled from deeper results, as if
those chunks had never been indexed: what remains is the topical neighbourhood
of the answer, the hardest case for a confidence gate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Unpack

from ragline.answer.answerer import SearchFn, SearchOptions
from ragline.types import Hit, SearchResult

#: Results fetched per wanted result, so a dropped answer is refilled from below.
DEPTH = 3


def without(search: SearchFn, drop: Callable[[Hit], bool], top_k: int) -> SearchFn:
    """``search`` that never returns a hit ``drop`` accepts (ranks renumbered)."""

    def wrapped(query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        k = options.get("top_k") or top_k
        deeper: SearchOptions = {**options, "top_k": k * DEPTH}
        result = search(query, **deeper)
        kept = [h for h in result.hits if not drop(h)][:k]
        hits = [replace(h, rank=i) for i, h in enumerate(kept, start=1)]
        return SearchResult(result.query, result.mode, hits, dict(result.timings_ms))

    return wrapped


def _norm(s: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", s.lower()))


def in_expected(source: str, section: str, expected: Sequence[Mapping[str, Any]]) -> bool:
    """A chunk from ``source`` > ``section`` is one of the expected (file, sections) pairs."""
    path = source.replace("\\", "/")
    return any(
        path.endswith("/" + str(e["file"])) and _norm(section) in {_norm(s) for s in e["sections"]}
        for e in expected
    )


def contains_answer(text: str, gold: Sequence[str]) -> bool:
    """True when ``text`` holds one of the gold answer strings (case and spacing ignored)."""
    t = f" {_norm(text)} "
    return any(f" {_norm(g)} " in t for g in gold if _norm(g))
