"""Answer-worthy sentences of a context: what an extractive answer may copy and
what the evidence check judges (one list, so both see the same sentences)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragline.answer.context import Context
from ragline.answer.sentences import (
    MATH,
    PROSE,
    TABLE,
    Segment,
    clean_sentence,
    is_unspaced,
    segments,
    word_count,
)

_MATH = re.compile(r"\$[^$]*\$")
_SEPARATOR_CELL = re.compile(r":?-{3,}:?")
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
    or a formula), and is mostly words rather than maths. Words of unspaced scripts
    (Chinese, Japanese) are counted by :func:`~ragline.answer.sentences.word_count`."""
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
        if not any(seg.kind == PROSE for seg in segs):  # a table alone: a sheet, a CSV
            for start, text in table_row_sentences(block.text, segs):
                if text.lower() not in seen:
                    seen.add(text.lower())
                    out.append(Candidate(block.number, start, text))
            continue
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


def table_row_sentences(text: str, segs: Sequence[Segment]) -> list[tuple[int, str]]:
    """Each body row of the pipe tables in ``segs`` as a sentence naming its columns
    ("Supplier: Fjordline Metals; Country: Norway; Lead time (days): 21."), with the
    row's offset: a spreadsheet's answer is a row, and a row means little without
    its header. Rows with fewer than two filled cells or over 60 words are skipped."""
    out: list[tuple[int, str]] = []
    header: list[str] = []
    in_table = False
    for seg in segs:
        if seg.kind != TABLE:
            in_table = False
            continue
        cells = _cells(text[seg.start : seg.end])
        if not in_table:
            header, in_table = cells, True
            continue
        if all(_SEPARATOR_CELL.fullmatch(c) for c in cells):
            continue
        pairs = [
            f"{name}: {value}" if name else value
            for name, value in zip(header + [""] * len(cells), cells, strict=False)
            if value
        ]
        sentence = "; ".join(pairs) + "."
        if len(pairs) >= 2 and len(sentence.split()) <= 60:
            out.append((seg.start, sentence[:1].upper() + sentence[1:]))
    return out


def _cells(line: str) -> list[str]:
    """The cells of one pipe-table line (``\\|`` is a literal bar)."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]
