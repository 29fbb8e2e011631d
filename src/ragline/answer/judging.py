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
import numpy.typing as npt

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
from ragline.answer.reading import BlockVerdict, ReaderBars, judge_by_reader, why_not_read
from ragline.answer.sentences import PROSE, segments
from ragline.reader import Reader


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
    #: "reader" when ragline's reader judged it (then ``verdicts`` holds the blocks'
    #: probabilities, best first), else "evidence".
    method: str = "evidence"
    verdicts: tuple[BlockVerdict, ...] = ()
    bar: float = 0.0

    @property
    def answers(self) -> bool:
        return self.best is not None and self.best.answers

    def best_candidate(self) -> Candidate | None:
        return self.candidates[self.best.index] if self.best is not None else None

    def reason(self, context: Context) -> str:
        """Why nothing answers (see :func:`ragline.answer.evidence.why_not`)."""
        if self.method == "reader":
            return why_not_read(
                self.verdicts, self.bar, self.constraints.question, tuple(self.constraints.years)
            )
        text = "\n".join(b.text for b in context.blocks)
        return why_not(self.constraints, self.best, text)


def passage_text(context: Context, number: int) -> str:
    """A block's label (title > section) and text: what a constraint may be met by."""
    block = context.block(number)
    return f"{block.label}\n{block.text}" if block is not None else ""


@dataclass(frozen=True, slots=True)
class ReaderJudge:
    """The reader and how its logits become decisions (see :mod:`ragline.answer.reading`)."""

    reader: Reader
    bars: ReaderBars
    max_passages: int = 8
    #: Answer only when the evidence check passes too (``judge=both``).
    with_evidence: bool = False


def judge_context(
    question: str,
    context: Context,
    embed: EmbedTexts,
    weights: EvidenceWeights,
    reader: ReaderJudge | None = None,
) -> ContextEvidence:
    """Every answer-worthy sentence of the context judged against ``question``: by the
    reader when one is given and the question is English (it was trained on English
    only), else by the evidence check; with ``reader.with_evidence`` the question is
    answered only when both find an answer (the reader picks the sentence)."""
    c = question_constraints(question)
    found = candidates(context)
    if not found:
        return ContextEvidence(c, (), (), None, (), weights=weights)
    texts = [cand.text for cand in found]
    vecs = embed([question, *texts])
    cos = np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)
    if reader is None or not c.english:
        return _by_evidence(c, question, context, found, cos, weights)
    if reader.with_evidence:
        by_evidence = _by_evidence(c, question, context, found, cos, weights)
        if not by_evidence.answers:
            return by_evidence  # the evidence check refuses: its verdict and reason stand
        lead = by_evidence.best_candidate()
        block = context.block(lead.block) if lead is not None else None
        if block is not None and is_table_only(block.text):
            # A sheet's rows: the reader was trained on prose, and on a pipe table its
            # span lands on the wrong row; the evidence check matches the row's cells.
            return by_evidence
    judged, verdicts = judge_by_reader(
        c,
        question,
        context,
        found,
        [float(x) for x in cos],
        reader.reader,
        reader.bars,
        reader.max_passages,
    )
    # The lead: the reader's sentence of the best-ranked block that answers. Retrieval
    # ranks pages well (the expected page is usually block 1); within a block, the
    # reader knows which sentence answers. The highest probability alone led with a
    # lower block's aside on ragline's own docs.
    answering = [e for e in judged if e.answers]
    best = (
        min(answering, key=lambda e: (found[e.index].block, -e.score))
        if answering
        else best_evidence(judged)
    )
    return ContextEvidence(
        c,
        tuple(found),
        tuple(judged),
        best,
        (),
        weights=weights,
        method="reader",
        verdicts=tuple(verdicts),
        bar=reader.bars.bar(c),
    )


def is_table_only(text: str) -> bool:
    """A block without prose (a spreadsheet, a CSV): its candidates are table rows."""
    return not any(seg.kind == PROSE for seg in segments(text))


def _by_evidence(
    c: Constraints,
    question: str,
    context: Context,
    found: list[Candidate],
    cos: npt.NDArray[np.float64],
    weights: EvidenceWeights,
) -> ContextEvidence:
    """The evidence check's verdict (:mod:`ragline.answer.evidence`)."""
    texts = [cand.text for cand in found]
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
