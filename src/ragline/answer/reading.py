"""The reader's verdict on a context: does a passage answer, and with which sentence?

The reader (:mod:`ragline.reader`) reads the question and each context block together
and gives the block's answerability and its best answer span. Here that becomes the
same :class:`~ragline.answer.evidence.Evidence` list the evidence check produces, so
the gate, the extractive answer and the confidence read one verdict:

* a block *answers* when its calibrated probability reaches the bar (questions and
  claims have their own, :class:`ReaderBars`);
* each answering block contributes one sentence: for a question the one holding the
  block's best answer span, for a claim (no span: the reader was not taught claim
  spans) the block sentence the reader scores highest as a pair with the claim;
* the other sentences keep a score for ordering but never answer: no topical padding;
* one check of today's stays beside the reader: a question naming a year is not answered
  by a block that gives other years and not that one. On SQuAD 2.0 pairs it vetoed 6 of
  4,733 answering pairs and 473 non-answering ones (45 of 1,294 constraint swaps); the same
  check on numbers vetoed 5.9 % of the answering pairs, so it was left out (measured in
  benchmarks/results/reader.md).

Pure but for the ``reader`` call; the probabilities are Platt-scaled logits
(``p = sigmoid(scale·logit + shift)``), fitted on the reader's held-in pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ragline.answer.candidates import Candidate
from ragline.answer.context import Context
from ragline.answer.evidence import Constraints, Evidence, years
from ragline.reader import Reader, Reading


@dataclass(frozen=True, slots=True)
class ReaderBars:
    """How the reader's logits become decisions (settings ``reader_*``)."""

    answer: float = 0.5  # calibrated probability a block needs to answer a question
    claim: float = 0.5  # … to support a statement
    high: float = 0.9  # level "high" from here
    scale: float = 1.0
    shift: float = 0.0

    def probability(self, logit: float) -> float:
        z = self.scale * logit + self.shift
        return 1.0 / (1.0 + math.exp(-z)) if z >= -60 else 0.0

    def bar(self, c: Constraints) -> float:
        return self.answer if c.question else self.claim


@dataclass(frozen=True, slots=True)
class BlockVerdict:
    """One block as the reader saw it: its number, label and calibrated probability."""

    number: int
    label: str
    probability: float
    #: Years the block gives when the question names another one (a veto), else empty.
    other_years: tuple[str, ...] = ()


def sentence_ranges(found: Sequence[Candidate], context: Context) -> list[tuple[int, int]]:
    """Each candidate's character range in its block: from its start to the next
    candidate's start in the same block (or the block's end)."""
    out: list[tuple[int, int]] = []
    for i, cand in enumerate(found):
        block = context.block(cand.block)
        end = len(block.text) if block is not None else cand.start + len(cand.text)
        for later in found[i + 1 :]:
            if later.block == cand.block and later.start > cand.start:
                end = min(end, later.start)
                break
        out.append((cand.start, max(end, cand.start + 1)))
    return out


def read_context(
    reader: Reader, question: str, context: Context, max_passages: int
) -> tuple[list[int], list[Reading], list[int]]:
    """The reader's readings of the first ``max_passages`` blocks (label, newline, text),
    with the block numbers and each passage's offset of the block text."""
    blocks = list(context.blocks)[:max_passages]
    passages = [f"{b.label}\n{b.text}" if b.label else b.text for b in blocks]
    offsets = [len(b.label) + 1 if b.label else 0 for b in blocks]
    return [b.number for b in blocks], reader.read(question, passages), offsets


def judge_by_reader(
    c: Constraints,
    question: str,
    context: Context,
    found: Sequence[Candidate],
    cosines: Sequence[float],
    reader: Reader,
    bars: ReaderBars,
    max_passages: int = 8,
) -> tuple[list[Evidence], list[BlockVerdict]]:
    """Every candidate judged by the reader, and the blocks' verdicts, best first."""
    numbers, readings, offsets = read_context(reader, question, context, max_passages)
    prob = {n: bars.probability(r.logit) for n, r in zip(numbers, readings, strict=True)}
    vetoed = {n: year_veto(c, context, n) for n in numbers}
    reading = dict(zip(numbers, readings, strict=True))
    shift = dict(zip(numbers, offsets, strict=True))
    ranges = sentence_ranges(found, context)
    bar = bars.bar(c)
    # Relative span score of each sentence: its best span against its block's best.
    block_best = {n: r.best_span(shift[n]) for n, r in reading.items()}  # once per block
    rel: list[float] = []
    for cand, (lo, hi) in zip(found, ranges, strict=True):
        r, best = reading.get(cand.block), block_best.get(cand.block)
        if r is None or best is None:
            rel.append(-math.inf)
            continue
        off = shift[cand.block]
        mine = r.best_span(lo + off, hi + off)
        rel.append(mine[0] - best[0] if mine is not None else -math.inf)
    leads: dict[int, int] = {}
    if c.question:
        for i, cand in enumerate(found):
            if cand.block in prob and (cand.block not in leads or rel[i] > rel[leads[cand.block]]):
                leads[cand.block] = i
    else:
        leads = claim_leads(reader, question, found, prob, bar)
    judged: list[Evidence] = []
    for i, cand in enumerate(found):
        p = prob.get(cand.block, 0.0)
        lead = leads.get(cand.block) == i
        score = p if lead else p * math.exp(max(rel[i], -30.0) / 4.0) * 0.5
        judged.append(
            Evidence(
                index=i,
                score=round(score, 6),
                answers=lead and p >= bar and not vetoed.get(cand.block),
                sentence_coverage=1.0 if lead else 0.0,
                passage_coverage=1.0,
                cosine=float(cosines[i]),
                notes=("reader",),
            )
        )
    verdicts = sorted(
        (
            BlockVerdict(n, b.label, prob[n], vetoed[n])
            for n in numbers
            if (b := context.block(n)) is not None
        ),
        key=lambda v: -v.probability,
    )
    return judged, verdicts


def year_veto(c: Constraints, context: Context, number: int) -> tuple[str, ...]:
    """The years block ``number`` gives when the question names years it does not."""
    block = context.block(number)
    if not c.years or block is None:
        return ()
    found = years(f"{block.label}\n{block.text}")
    return tuple(sorted(found)) if found and not set(c.years) <= found else ()


def claim_leads(
    reader: Reader,
    claim: str,
    found: Sequence[Candidate],
    prob: dict[int, float],
    bar: float,
) -> dict[int, int]:
    """For a claim: in each block that supports it, the sentence the reader scores
    highest as a (claim, sentence) pair (the block's first sentence elsewhere)."""
    leads: dict[int, int] = {}
    best_logit: dict[int, float] = {}
    ask = [i for i, cand in enumerate(found) if prob.get(cand.block, 0.0) >= bar]
    scores = reader.read_pairs([(claim, found[i].text) for i in ask])
    for i, r in zip(ask, scores, strict=True):
        b = found[i].block
        if b not in leads or r.logit > best_logit[b]:
            leads[b] = i
            best_logit[b] = r.logit
    for i, cand in enumerate(found):
        leads.setdefault(cand.block, i)
    return leads


def why_not_read(
    verdicts: Sequence[BlockVerdict], bar: float, question: bool, asked: Sequence[str] = ()
) -> str:
    """Why the reader does not answer, naming what the passages do cover."""
    if not verdicts:
        return "no retrieved passage has a sentence to check"
    labels = list(dict.fromkeys(v.label for v in verdicts if v.label))[:2]
    cover = " and ".join(f"'{x}'" for x in labels) if labels else "related topics"
    top = verdicts[0]
    dated = [v for v in verdicts if v.probability >= bar and v.other_years]
    if dated and all(v.other_years for v in verdicts if v.probability >= bar):
        found = sorted({y for v in dated for y in v.other_years})[:3]
        wanted = ", ".join(sorted(asked)) or "the year asked"
        return f"the passages cover {', '.join(found)}, not {wanted}"
    what = "answers the question" if question else "supports the statement"
    return (
        f"the passages cover {cover}, but none of them {what} "
        f"(reader {top.probability:.2f} at best, {bar:.2f} needed)"
    )
