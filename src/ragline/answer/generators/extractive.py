"""The extractive generator: an answer made of the context's own sentences.

No model writes anything, so the answer cannot say what the documents do not:
each sentence is copied (cleaned of Markdown roles) from a context block and
cited with that block's number. With the evidence check (the default), the
answer leads with the sentence that answers the question best
(:mod:`ragline.answer.evidence`) and adds only sentences that pass the same
check, chosen by maximal marginal relevance (chunk overlap repeats sentences
verbatim) and put in context order after the lead: no topical padding. Without
it (or when no sentence passes, for a generator used on its own), sentences are
chosen by embedding similarity plus word overlap and block relevance, in
context order. All candidate sentences are embedded in one batch, and the other
sentences of the cited blocks in a second one, both cached for the citation
check that follows (``embed`` is meant to be the shared
:class:`~ragline.answer.embedding_cache.EmbeddingCache`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from ragline.answer.candidates import Candidate, candidates
from ragline.answer.citations import EmbedTexts, evidence_segments, lexical_overlap
from ragline.answer.evidence import Evidence, EvidenceWeights
from ragline.answer.generators.base import Delta, GenerationRequest
from ragline.answer.judging import ContextEvidence, judge_context

#: How a claim's cited sentence is chosen within its passage: the learned log-odds plus
#: this much per 30 words and this much from the passage's first sentence to its last
#: (benchmarks/claim_citations.py: chosen on SciFact train claims of odd ids).
CLAIM_LEAD_WORDS = 1.0
CLAIM_LEAD_POSITION = 0.5


def select_sentences(
    relevance: Sequence[float],
    similarity: np.ndarray,
    *,
    max_sentences: int,
    diversity: float = 0.3,
    keep_ratio: float = 0.75,
    duplicate: float = 0.9,
) -> list[int]:
    """Indices chosen by maximal marginal relevance (pure).

    ``relevance[i]`` scores candidate i against the question and
    ``similarity[i, j]`` compares candidates. Each round takes the candidate with
    the best ``(1 − diversity)·relevance − diversity·max similarity to the chosen``;
    candidates below ``keep_ratio`` × the best relevance are never taken (they
    would dilute a focused answer), nor near-duplicates of a chosen one.
    """
    n = len(relevance)
    if n == 0 or max_sentences < 1:
        return []
    rel = np.asarray(relevance, dtype=np.float64)
    best = float(rel.max())
    floor = best * keep_ratio if best > 0 else best
    chosen: list[int] = []
    open_ = [i for i in range(n) if rel[i] >= floor]
    while open_ and len(chosen) < max_sentences:

        def mmr(i: int) -> float:
            red = max((float(similarity[i, j]) for j in chosen), default=0.0)
            return (1 - diversity) * float(rel[i]) - diversity * red

        pick = max(open_, key=mmr)
        chosen.append(pick)
        open_ = [i for i in open_ if i != pick and float(similarity[i, pick]) < duplicate]
    return chosen


def log_odds(probability: float) -> float:
    """``log(p / (1 − p))``, with ``p`` kept off 0 and 1."""
    p = min(max(probability, 1e-9), 1.0 - 1e-9)
    return math.log(p / (1.0 - p))


def claim_passage_key(probability: float, rank: int, rank_weight: float) -> float:
    """A claim's passage among those holding a passing sentence: the learned log-odds
    of the sentence less ``rank_weight`` per place down the context (``rank`` 1 is the
    first block). The scorer sees one sentence; the retriever ranked the whole
    abstract, and on SciFact a passing sentence of a lower-ranked abstract that the
    scorer prefers is more often a wrong source (benchmarks/claim_documents.py).
    """
    return log_odds(probability) - rank_weight * (rank - 1)


def claim_cites_further(
    probability: float,
    rank: int,
    same_document: bool,
    lead_rank: int,
    *,
    extra_min: float,
    other_document_ranks: int,
) -> bool:
    """Whether a passing sentence after a claim's lead is cited too: it must be
    likely evidence itself (``extra_min``) and come from the lead's document or from
    a block at most ``other_document_ranks`` places after the lead's (a second
    document ranked below the one answering is mostly a topical neighbour)."""
    return probability >= extra_min and (same_document or rank <= lead_rank + other_document_ranks)


def claim_lead_key(probability: float, words: int, position: float) -> float:
    """A claim's lead sentence among the passing sentences of its passage: the learned
    scorer's log-odds, plus a bonus for a long sentence and for a late one
    (``position`` 0 for the passage's first candidate sentence, 1 for its last).
    SciFact's rationale sentences are mostly the results, long and late in the
    abstract, where the scorer alone often prefers the opening statement of the topic.
    """
    return log_odds(probability) + CLAIM_LEAD_WORDS * words / 30 + CLAIM_LEAD_POSITION * position


def claim_lead(ev: ContextEvidence, passing: Sequence[Evidence], lead: Evidence) -> Evidence:
    """The passing sentence of ``lead``'s passage that :func:`claim_lead_key` prefers."""
    block = ev.candidates[lead.index].block
    order = [i for i, c in enumerate(ev.candidates) if c.block == block]
    last = max(len(order) - 1, 1)

    def key(e: Evidence) -> float:
        words = len(ev.candidates[e.index].text.split())
        return claim_lead_key(e.score, words, order.index(e.index) / last)

    return max((e for e in passing if ev.candidates[e.index].block == block), key=key)


def cite(text: str, number: int) -> str:
    """``text`` with ``[number]`` before its final punctuation: "X is Y [2]."."""
    body = text.rstrip()
    if body.endswith(("。", "！")):  # CJK: "XはYです[2]。"
        return f"{body[:-1]}[{number}]{body[-1]}"
    stripped = body.rstrip(".!;")
    end = body[len(stripped) : len(stripped) + 1] or "."
    return f"{stripped.rstrip()} [{number}]{end if end != ';' else '.'}"


class ExtractiveGenerator:
    """Answers with the best context sentences, each cited. No model, always faithful."""

    def __init__(
        self,
        embed: EmbedTexts,
        *,
        max_sentences: int = 3,
        lexical_weight: float = 0.3,
        block_weight: float = 0.6,
        evidence: EvidenceWeights | None = None,
        claim_extra_min: float = 0.0,
        claim_rank_weight: float = 0.0,
        claim_other_document_ranks: int | None = None,
    ) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        self.embed = embed
        self.max_sentences = max_sentences
        self.lexical_weight = lexical_weight
        self.block_weight = block_weight
        self.evidence = evidence
        self.claim_extra_min = claim_extra_min
        self.claim_rank_weight = claim_rank_weight
        #: None: a further sentence may come from any block (no document rule).
        self.claim_other_document_ranks = claim_other_document_ranks

    @property
    def name(self) -> str:
        return "extractive"

    @property
    def model(self) -> str:
        return ""

    def compose(self, request: GenerationRequest) -> list[Candidate]:
        """The chosen sentences: the answering one first, the rest in reading order."""
        if self.evidence is not None and not request.selected_text:
            led = self._evidence_led(request, self.evidence)
            if led:
                return led
        return self._by_relevance(request)

    def _evidence_led(
        self, request: GenerationRequest, weights: EvidenceWeights
    ) -> list[Candidate]:
        """Only sentences that pass the evidence check; the best one leads."""
        ev = request.evidence
        if ev is None or ev.weights != weights:
            ev = judge_context(request.question, request.context, self.embed, weights)
        passing = [e for e in ev.judged if e.answers]
        if not passing:
            return []
        if ev.method == "reader" and ev.best is not None:
            # The reader's pick in the best-ranked answering block leads; each further
            # answering block adds its own pick, in context order.
            lead = ev.best
            further = sorted(
                (e for e in passing if e is not lead), key=lambda e: ev.candidates[e.index].block
            )[: self.max_sentences - 1]
            rest = sorted(
                (ev.candidates[e.index] for e in further), key=lambda c: (c.block, c.start)
            )
            return [ev.candidates[lead.index], *rest]
        # Among answering sentences, the retriever's view of their block still counts:
        # it knows the section (title, headings) that a lone sentence does not show.
        # The learned score weighs it already (its block cosine and rank features).
        b = 0.0 if weights.learned_for(ev.constraints) else self.block_weight
        block_rel = {blk.number: blk.hit.vector_score or 0.0 for blk in request.context.blocks}
        rel = [(1 - b) * e.score + b * block_rel[ev.candidates[e.index].block] for e in passing]
        lead = passing[max(range(len(passing)), key=lambda i: rel[i])]
        if weights.learned_for(ev.constraints) and not ev.constraints.question:
            # The passage: the scorer's probability discounted by the block's place in
            # the context; the sentence cited from it is re-chosen, and takes the best
            # sentence's place in the selection below (benchmarks/claim_documents.py).
            passage = max(
                passing,
                key=lambda e: claim_passage_key(
                    e.score, ev.candidates[e.index].block, self.claim_rank_weight
                ),
            )
            chosen = claim_lead(ev, passing, passage)
            i, j = passing.index(lead), passing.index(chosen)
            rel[i], rel[j] = rel[j], rel[i]
            lead = chosen
            # A claim's further citations must be likelier evidence than the bar that
            # lets a claim be answered at all (benchmarks/claim_citations.py), and a
            # second document must not rank far below the lead's.
            doc = {blk.number: blk.hit.chunk.doc_id for blk in request.context.blocks}
            lead_block = ev.candidates[lead.index].block
            others = self.claim_other_document_ranks
            keep = [
                i
                for i, e in enumerate(passing)
                if e is lead
                or claim_cites_further(
                    e.score,
                    ev.candidates[e.index].block,
                    doc[ev.candidates[e.index].block] == doc[lead_block],
                    lead_block,
                    extra_min=self.claim_extra_min,
                    other_document_ranks=len(doc) if others is None else others,
                )
            ]
            passing, rel = [passing[i] for i in keep], [rel[i] for i in keep]
        texts = [ev.candidates[e.index].text for e in passing]
        vecs = self.embed(texts)
        picked = select_sentences(rel, vecs @ vecs.T, max_sentences=self.max_sentences)
        rest = sorted(
            (ev.candidates[passing[i].index] for i in picked if passing[i] is not lead),
            key=lambda c: (c.block, c.start),
        )
        return [ev.candidates[lead.index], *rest]

    def _by_relevance(self, request: GenerationRequest) -> list[Candidate]:
        found = candidates(request.context)
        if not found:
            return []
        query = request.question
        if request.selected_text:
            query = f"{query}\n{request.selected_text}"
        vecs = self.embed([query, *(c.text for c in found)])
        sent = vecs[1:]
        cos = sent @ vecs[0]
        w, b = self.lexical_weight, self.block_weight
        block_rel = {blk.number: blk.hit.vector_score or 0.0 for blk in request.context.blocks}
        relevance = [
            (1 - b) * ((1 - w) * float(c) + w * lexical_overlap(query, cand.text))
            + b * block_rel[cand.block]
            for c, cand in zip(cos, found, strict=True)
        ]
        picked = select_sentences(relevance, sent @ sent.T, max_sentences=self.max_sentences)
        return sorted((found[i] for i in picked), key=lambda c: (c.block, c.start))

    def prefetch_support(self, request: GenerationRequest, chosen: Sequence[Candidate]) -> None:
        """Embed every sentence of the blocks the answer will cite, in one batch.

        The citation check that follows compares each answer sentence with every
        sentence of its block (:func:`~ragline.answer.citations.evidence_segments`),
        through the same cache; the candidates are embedded already, but headings and
        short or unfinished sentences are not. Embedded here they cost one model
        call instead of one per citation, which on a busy CPU is most of their cost.
        """
        texts: list[str] = []
        for number in dict.fromkeys(c.block for c in chosen):
            block = request.context.block(number)
            if block is not None:
                texts += [block.text[s.start : s.end] for s in evidence_segments(block.text)]
        if texts:
            self.embed(texts)

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        prev = ""
        chosen = self.compose(request)
        self.prefetch_support(request, chosen)
        for cand in chosen:
            # CJK text puts no space after 。 (and there is none before the first).
            sep = "" if not prev or prev.endswith(("。", "！")) else " "
            yield Delta(text=sep + cite(cand.text, cand.block))
            prev = cand.text
