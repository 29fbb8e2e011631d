"""The extractive generator: an answer made of the context's own sentences.

No model writes anything, so the answer cannot say what the documents do not:
each sentence is copied (cleaned of Markdown roles) from a context block and
cited with that block's number. Sentences are chosen by embedding similarity to
the question plus word overlap, with maximal-marginal-relevance to avoid saying
the same thing twice (chunk overlap repeats sentences verbatim), and are put
back in context order so the answer reads in the order of the sources.
All candidate sentences are embedded in one batch (and cached for the
citation check that follows).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ragline.answer.citations import EmbedTexts, lexical_overlap
from ragline.answer.context import Context
from ragline.answer.generators.base import Delta, GenerationRequest
from ragline.answer.sentences import MATH, PROSE, clean_sentence, is_unspaced, segments, word_count

_MATH = re.compile(r"\$[^$]*\$")
_EXERCISES = re.compile(r"^\s*(exercises?|problems?|questions?|quiz)\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A context sentence that could go into the answer."""

    block: int  # context block number
    start: int  # span in the block text (reading order)
    text: str  # cleaned for display


def is_answer_sentence(text: str) -> bool:
    """Prose that reads on its own: 5–60 words, starts like a sentence (not a chunk
    cut mid-sentence), ends like a statement (not a question, not a lead-in to code
    or a formula), and is mostly words rather than maths."""
    if not 5 <= word_count(text) <= 60:
        return False
    first = text.lstrip("*_\"'“(¡")[:1]
    if (
        not first
        or (first.islower() and not is_unspaced(text))
        or not text.rstrip("*_\"'”’)」』）").endswith((".", "!", "。", "！"))
    ):
        return False
    prose = _MATH.sub("", text)
    letters = sum(ch.isalpha() for ch in prose)
    return letters >= 0.5 * len(text) and word_count(prose) >= 4


def candidates(context: Context) -> list[Candidate]:
    """Answer-worthy sentences of every block, in context order, duplicates removed.

    Exercise sections are skipped: their sentences are tasks, not answers. A
    sentence that runs on into a displayed formula after a comma ("… converges
    irrespective of the initialization $V_0$," then ``$$…$$``) is complete
    before the formula, so it is kept, ending with a full stop.
    """
    out: list[Candidate] = []
    seen: set[str] = set()
    for block in context.blocks:
        if _EXERCISES.match(block.hit.chunk.section):
            continue
        segs = segments(block.text)
        for i, seg in enumerate(segs):
            if seg.kind != PROSE:
                continue
            text = clean_sentence(block.text[seg.start : seg.end])
            if text.endswith(",") and i + 1 < len(segs) and segs[i + 1].kind == MATH:
                text = text[:-1] + "."
            key = text.lower()
            if key in seen or not is_answer_sentence(text):
                continue
            seen.add(key)
            out.append(Candidate(block.number, seg.start, text))
    return out


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
    ) -> None:
        if max_sentences < 1:
            raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
        self.embed = embed
        self.max_sentences = max_sentences
        self.lexical_weight = lexical_weight
        self.block_weight = block_weight

    @property
    def name(self) -> str:
        return "extractive"

    @property
    def model(self) -> str:
        return ""

    def compose(self, request: GenerationRequest) -> list[Candidate]:
        """The chosen sentences, in reading order."""
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

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        prev = ""
        for cand in self.compose(request):
            # CJK text puts no space after 。 (and there is none before the first).
            sep = "" if not prev or prev.endswith(("。", "！")) else " "
            yield Delta(text=sep + cite(cand.text, cand.block))
            prev = cand.text
