"""Answer-worthy sentences of a context: what an extractive answer may copy and
what the evidence check judges (one list, so both see the same sentences)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragline.answer.context import Context
from ragline.answer.sentences import MATH, PROSE, clean_sentence, segments

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
    words = text.split()
    if not 5 <= len(words) <= 60:
        return False
    first = text.lstrip("*_\"'“(")[:1]
    if not first or first.islower() or not text.rstrip("*_\"'”’)").endswith((".", "!")):
        return False
    prose = _MATH.sub("", text)
    letters = sum(ch.isalpha() for ch in prose)
    return letters >= 0.5 * len(text) and len(prose.split()) >= 4


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
