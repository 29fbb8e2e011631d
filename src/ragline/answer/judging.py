"""Judge a built context against the question: which sentence, if any, answers it.

The answerer asks this before calling a generator (no answering sentence → the
fallback, listing the passages as related), the extractive generator uses it to
lead with the answering sentence, and the confidence level reads its verdict.
The judgement itself is :mod:`ragline.answer.evidence` (pure); this module only
collects the candidate sentences of the context and embeds them in one batch
(through the embedding cache, so the generator's second look costs no model call).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragline.answer.candidates import Candidate, candidates
from ragline.answer.citations import EmbedTexts
from ragline.answer.context import Context
from ragline.answer.evidence import (
    Constraints,
    Evidence,
    EvidenceWeights,
    TermWeights,
    best_evidence,
    bm25_scores,
    judge,
    question_constraints,
    rescore,
    sentence_features,
    why_not,
)


@dataclass(frozen=True, slots=True)
class ContextEvidence:
    """The context's candidate sentences, each judged, and the verdict."""

    constraints: Constraints
    candidates: tuple[Candidate, ...]
    judged: tuple[Evidence, ...]
    best: Evidence | None
    bm25: tuple[float, ...]
    features: tuple[tuple[float, ...], ...] = ()  # :data:`~ragline.answer.evidence.FEATURES`
    #: The weights it was judged with (a generator reuses the verdict only under its own).
    weights: EvidenceWeights | None = None

    @property
    def answers(self) -> bool:
        return self.best is not None and self.best.answers

    def best_candidate(self) -> Candidate | None:
        return self.candidates[self.best.index] if self.best is not None else None

    def reason(self, context: Context) -> str:
        """Why nothing answers (see :func:`ragline.answer.evidence.why_not`)."""
        text = "\n".join(b.text for b in context.blocks)
        return why_not(self.constraints, self.best, text)


def passage_text(context: Context, number: int) -> str:
    """A block's label (title > section) and text: what a constraint may be met by."""
    block = context.block(number)
    return f"{block.label}\n{block.text}" if block is not None else ""


def judge_context(
    question: str, context: Context, embed: EmbedTexts, weights: EvidenceWeights
) -> ContextEvidence:
    """Every answer-worthy sentence of the context judged against ``question``."""
    c = question_constraints(question)
    found = candidates(context)
    if not found:
        return ContextEvidence(c, (), (), None, (), weights=weights)
    texts = [cand.text for cand in found]
    vecs = embed([question, *texts])
    cos = np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)
    passages = {b.number: passage_text(context, b.number) for b in context.blocks}
    term_weights = TermWeights.of(texts)
    judged = judge(
        c,
        question,
        texts,
        [passages[cand.block] for cand in found],
        [float(x) for x in cos],
        term_weights,
        weights,
    )
    bm25 = bm25_scores(c.terms, texts, term_weights)
    block_cos = {b.number: b.hit.vector_score or 0.0 for b in context.blocks}
    feats = sentence_features(
        judged,
        [cand.block for cand in found],
        bm25,
        [block_cos[cand.block] for cand in found],
        c.question,
    )
    if weights.scorer is not None and weights.learned_for(c):
        judged = rescore(c, judged, feats, weights.scorer, weights)
    return ContextEvidence(
        c,
        tuple(found),
        tuple(judged),
        best_evidence(judged),
        tuple(bm25),
        tuple(feats),
        weights,
    )
