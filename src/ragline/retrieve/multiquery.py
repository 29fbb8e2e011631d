"""Multi-query rewriting: an LLM phrases the question N other ways, each is searched,
and the hit lists are fused.

A question worded unlike the passage that answers it misses on both sides of hybrid
search; a paraphrase may use the passage's words. The LLM call sits at the edge
(:class:`ChatExpander`, through the same ``Complete`` callable the conversation
rewriter uses); reading its reply (:func:`parse_phrasings`) and merging the searches
(:func:`fuse_results`, reciprocal rank fusion over the primary hits) are pure.

Measured before being switched on (``benchmarks/query_expansion.py --variants
none,multi-query``; benchmarks/results/query_expansion.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ragline.fusion import reciprocal_rank_fusion
from ragline.retrieve.conversation import Complete
from ragline.types import Hit, SearchResult

EXPAND_PROMPT = (
    "Write {n} different ways to ask the user's question, one per line, so that a "
    "search engine finds the passages that answer it: use other words and synonyms, "
    "keep the meaning and the question's language. Reply with the {n} lines only, "
    "no numbering and no other text."
)

#: A list marker or label a model puts before a line ("1.", "2)", "-", "Query 3:").
_MARKER = re.compile(
    r"^\s*(?:[-*•]+|\(?\d{1,2}[.):]|(?:q|query|question|phrasing|version|option)\s*\d{0,2}\s*[.):])(?=\s)\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’「」`"


@dataclass(frozen=True, slots=True)
class Expansion:
    """The queries searched (the question first) and how they came about.

    ``method``: ``"none"`` (expansion off), ``"llm"`` (phrasings added),
    ``"empty"`` (the model replied with no usable line) or ``"failed"`` (the model
    call raised: ``error`` says why; the question is searched alone).
    """

    queries: tuple[str, ...]
    method: str
    error: str = ""

    @property
    def phrasings(self) -> tuple[str, ...]:
        """The queries besides the question itself."""
        return self.queries[1:]


class QueryExpander(Protocol):
    def expand(self, question: str) -> Expansion: ...


def expansion_messages(question: str, n: int) -> list[dict[str, str]]:
    """The chat the LLM writes the phrasings from."""
    return [
        {"role": "system", "content": EXPAND_PROMPT.format(n=n)},
        {"role": "user", "content": question},
    ]


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def parse_phrasings(reply: str, question: str, n: int, max_chars: int) -> list[str]:
    """At most ``n`` usable lines of ``reply``, in order.

    List markers and wrapping quotes are stripped; a line that is empty, longer than
    ``max_chars``, the question again, or a repeat (ignoring case and punctuation) is
    dropped, as is a preamble ending in ":" ("Here are 3 ways:").
    """
    seen = {_key(question)}
    out: list[str] = []
    for raw in reply.splitlines():
        line = " ".join(raw.split())
        if not line or line.endswith(":"):
            continue
        line = _MARKER.sub("", line, count=1).strip().strip(_QUOTES).strip()
        key = _key(line)
        if not key or len(line) > max_chars or key in seen:
            continue
        seen.add(key)
        out.append(line)
        if len(out) >= n:
            break
    return out


class ChatExpander:
    """Asks an LLM for ``n`` phrasings; a failing model leaves the question alone."""

    def __init__(self, complete: Complete, n: int = 3, max_chars: int = 300) -> None:
        self.complete = complete
        self.n = n
        self.max_chars = max_chars

    def expand(self, question: str) -> Expansion:
        try:
            reply = self.complete(expansion_messages(question, self.n))
        except Exception as exc:  # a timeout, an HTTP error, a broken local model
            return Expansion((question,), "failed", f"{type(exc).__name__}: {exc}"[:300])
        lines = parse_phrasings(reply, question, self.n, self.max_chars)
        if not lines:
            return Expansion((question,), "empty")
        return Expansion((question, *lines), "llm")


def fuse_results(results: Sequence[SearchResult], top_k: int, k: int = 60) -> SearchResult:
    """One result from the searches of several phrasings, the question's first.

    The primary hits of each search (not the neighbours expansion added) are merged
    by reciprocal rank fusion and cut to ``top_k``; each kept hit brings back the
    neighbours its first search gave it. A hit keeps the scores of the first search
    that found it, except that a hit the question's own search missed loses its
    cosine: it was the cosine to a paraphrase, and confidence must judge the
    question asked (the answerer embeds it again). Timings are summed.
    """
    if not results:
        raise ValueError("fuse_results needs at least one search result")
    first = results[0]
    if len(results) == 1:
        return first
    lists = [[h for h in r.hits if h.expanded_from is None] for r in results]
    fused = reciprocal_rank_fusion(lists, k=k)[:top_k]
    own = {h.chunk.id for h in lists[0]}
    groups: dict[str, list[Hit]] = {}  # a hit's neighbours, from the first search with some
    for r in results:
        found: dict[str, list[Hit]] = {}
        for h in r.hits:
            if h.expanded_from is not None:
                found.setdefault(h.expanded_from, []).append(h)
        for parent, group in found.items():
            groups.setdefault(parent, group)
    present = {h.chunk.id for h in fused}
    hits: list[Hit] = []
    for rank, h in enumerate(fused, start=1):
        kept = replace(h, rank=rank, vector_score=h.vector_score if h.chunk.id in own else None)
        around = [n for n in groups.get(h.chunk.id, []) if n.chunk.id not in present]
        present.update(n.chunk.id for n in around)
        added = [replace(n, score=kept.score, rank=rank) for n in around]
        at = h.chunk.chunk_index
        hits += [n for n in added if n.chunk.chunk_index < at]
        hits.append(kept)
        hits += [n for n in added if n.chunk.chunk_index > at]
    timings: dict[str, float] = {}
    for r in results:
        for stage, ms in r.timings_ms.items():
            timings[stage] = timings.get(stage, 0.0) + ms
    return SearchResult(first.query, first.mode, hits, timings, first.language)
