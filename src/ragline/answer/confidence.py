"""Confidence: should ragline answer at all, and how sure is it?

The score is the best cosine similarity between the question and a retrieved
chunk (``Hit.vector_score``, expansion neighbours excluded). It is a property
of the embedding model, so its thresholds are calibrated per model on
evaluation data (benchmarks/answers.py: in-scope d2l-en questions against
out-of-scope ones, thresholds fitted on the train split and reported on the
dev split), never copied from another model's cosine scale. Hits of a BM25-only
search get their cosine from :func:`fill_relevance` first; a hit still without
one counts for nothing: it cannot show it is about the question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from ragline.answer.evidence import Evidence
from ragline.embed.base import Vectors
from ragline.types import Confidence, Hit

HIGH = "high"
MEDIUM = "medium"
LOW = "low"


def relevances(hits: Sequence[Hit]) -> list[float]:
    """Cosines of the retrieved hits (not of neighbours added by expansion), best first."""
    return sorted(
        (h.vector_score for h in hits if h.expanded_from is None and h.vector_score is not None),
        reverse=True,
    )


def confidence_score(hits: Sequence[Hit]) -> float:
    """The top relevance (0 when nothing retrieved has a cosine)."""
    r = relevances(hits)
    return max(0.0, r[0]) if r else 0.0


def assess(hits: Sequence[Hit], minimum: float, high: float) -> Confidence:
    """Score, level and a reason a person can read.

    ``low`` (below ``minimum``) means: do not answer, return the fallback.
    """
    r = relevances(hits)
    score = max(0.0, r[0]) if r else 0.0
    supporting = sum(1 for x in r if x >= minimum)
    if not r:
        return Confidence(0.0, LOW, "nothing relevant was retrieved")
    if score < minimum:
        return Confidence(
            score, LOW, f"no source is relevant enough (top relevance {score:.2f} < {minimum:.2f})"
        )
    level = HIGH if score >= high else MEDIUM
    noun = "source" if supporting == 1 else "sources"
    return Confidence(score, level, f"{supporting} {noun}, top relevance {score:.2f}")


def fill_relevance(
    query: str, hits: Sequence[Hit], embed: Callable[[Sequence[str]], Vectors]
) -> list[Hit]:
    """Hits with a cosine for every retrieved hit that lacks one.

    BM25-only search does not embed the query, so its hits carry no
    ``vector_score`` and confidence would read 0 for every question. Their
    ``embed_text`` (what the index embedded) is embedded here instead, in one batch.
    """
    missing = [i for i, h in enumerate(hits) if h.vector_score is None and h.expanded_from is None]
    if not missing:
        return list(hits)
    vecs = embed([query, *(hits[i].chunk.embed_text for i in missing)])
    out = list(hits)
    for row, i in enumerate(missing, start=1):
        out[i] = replace(hits[i], vector_score=float(vecs[row] @ vecs[0]))
    return out


def smalltalk_confidence() -> Confidence:
    return Confidence(0.0, LOW, "small talk: nothing was retrieved")


def with_evidence(
    retrieval: Confidence,
    best: Evidence | None,
    answers: bool,
    why_not: str,
    label: str = "",
) -> Confidence:
    """Confidence from retrieval *and* evidence: a topical passage that does not
    answer the question makes the level ``low`` (the fallback), whatever its cosine.

    The score averages the top relevance and the best evidence score; the level is
    ``high`` only when retrieval is high and the answering sentence holds every key
    term of the question itself (not just its passage). ``label`` names the answering
    block for the reason.
    """
    ev = best.score if best is not None else 0.0
    score = round((retrieval.score + ev) / 2, 4)
    if not answers or best is None:
        return Confidence(score, LOW, why_not)
    whole = best.sentence_coverage >= 1.0 - 1e-9
    level = HIGH if retrieval.level == HIGH and whole else MEDIUM
    where = f" in {label}" if label else ""
    return Confidence(
        score,
        level,
        f"{retrieval.reason}; a sentence{where} answers it (evidence {ev:.2f}, "
        f"{best.sentence_coverage:.0%} of the key terms)",
    )


def with_reader(
    retrieval: Confidence,
    probability: float,
    answers: bool,
    why_not: str,
    high: float,
    label: str = "",
) -> Confidence:
    """Confidence from the reader's calibrated probability that the best block answers:
    the score *is* that probability (it tracks how often such answers are right, see
    benchmarks/results/reader.md), ``high`` only from ``high`` on, ``low`` (the fallback)
    when no block answers, whatever the cosines."""
    score = round(probability, 4)
    if not answers:
        return Confidence(score, LOW, why_not)
    where = f" in {label}" if label else ""
    return Confidence(
        score,
        HIGH if probability >= high else MEDIUM,
        f"{retrieval.reason}; the reader finds the answer{where} (p = {probability:.2f})",
    )
