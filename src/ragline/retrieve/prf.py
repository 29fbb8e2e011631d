"""Query preprocessing on the keyword side: pseudo-relevance feedback and definitions.

Both are pure functions over analysed terms (``ragline.text.bm25``), measured by
``benchmarks/query_expansion.py`` before any is switched on (see
benchmarks/results/query_expansion.md).

* :func:`feedback_terms`: RM3-style expansion. The top-ranked chunks of a first
  keyword search are assumed relevant; the terms they share most, weighted by
  each chunk's share of the feedback scores, are added to the query.
* :func:`definition_subject`: the thing a chunk defines, when its lead sentence
  reads "X is a …" / "X refers to …" / "X: …" (a glossary entry), so a "what is
  X" question can favour the chunk that defines X (seed 001's +0.4 boost).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from ragline.text.bm25 import tokenize

_LEAD = re.compile(
    r"^\s*(?:#+[^\n]*\n+)*\s*(?:(?:the|an?|un|una|une|el|la|le|les)\s+)?[*_`]{0,2}(?P<subject>[^\n.,;:*_`]{2,60}?)[*_`]{0,2}"
    r"\s*(?:\([^)]{0,60}\)\s*)?(?:is|are|refers to|denotes|means|es|son|est|sont)\s+"
    r"(?:an?|the|un|una|une|el|la|le|les|one of|a kind of)\b",
    re.IGNORECASE,
)
_GLOSSARY = re.compile(r"^\s*(?:[-*]\s+)?\*\*(?P<subject>[^*\n]{2,60})\*\*\s*[:—–-]\s+\S")


def feedback_terms(
    query: Counter[str],
    feedback: Sequence[tuple[Mapping[str, int], int, float]],
    n_terms: int = 10,
) -> list[str]:
    """The ``n_terms`` best expansion terms (not already in ``query``).

    ``feedback`` holds the top chunks of a first search as (term counts,
    length, score); a term's weight is Σ score_d/Σscore · tf_d(t)/len_d.
    """
    total = sum(max(s, 0.0) for _, _, s in feedback)
    if total <= 0:
        return []
    weights: dict[str, float] = {}
    for tf, length, score in feedback:
        if length <= 0 or score <= 0:
            continue
        share = score / total
        for term, n in tf.items():
            if term not in query:
                weights[term] = weights.get(term, 0.0) + share * n / length
    return sorted(weights, key=lambda t: (-weights[t], t))[:n_terms]


def definition_subject(text: str) -> str | None:
    """The subject a chunk's lead sentence (or a glossary entry) defines, or None."""
    for pattern in (_GLOSSARY, _LEAD):
        m = pattern.match(text)
        if m:
            subject = " ".join(m.group("subject").split())
            if subject and len(subject.split()) <= 6:
                return subject
    return None


def defines(text: str, query_terms: set[str], language: str | None = None) -> bool:
    """True when ``text`` defines something all of whose terms the query asks about."""
    subject = definition_subject(text)
    if subject is None:
        return False
    terms = set(tokenize(subject, language))
    return bool(terms) and terms <= query_terms
