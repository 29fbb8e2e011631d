"""Sentence spans of Markdown text, with code, maths and tables kept out of prose.

Answering needs sentences three times: the extractive generator picks them, the
citation verifier compares an answer sentence with the cited chunk's sentences,
and the context is cut only at a sentence end. Textbook Markdown wraps one
sentence over several lines and interleaves code fences, ``$$`` maths, tables
and directives such as ``:label:``, so a plain ``. `` split is not enough.
Every function returns spans into the original text, so a citation can point
at the exact characters that support it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Segment kinds; only ``prose`` segments are sentences.
PROSE = "prose"
CODE = "code"
MATH = "math"
TABLE = "table"
HEADING = "heading"
OTHER = "other"

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(\s|$)")
_TABLE = re.compile(r"^\s*\|")
_DIRECTIVE = re.compile(r"^\s*:[A-Za-z_]+:")  # :label:`x`, :begin_tab:, :width:…
_HTML = re.compile(r"^\s*<")
_IMAGE = re.compile(r"^\s*!\[")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])\s+")
_MATH_OPEN = re.compile(r"^\s*\$\$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")

#: A candidate sentence end: terminal punctuation, closing quotes/brackets, spaces;
#: or CJK full-width terminal punctuation, which needs no space after it.
_END = re.compile(r"[.!?]+[\"'”’)\]*_]*(?=\s)|[。！？]+[」』”’）)\]*_]*")
_NEXT_STARTS = re.compile(r"\s+[\"'“‘(\[*_$`¿¡«]*([^\W_])")
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "al",
        "fig",
        "figs",
        "eq",
        "eqs",
        "sec",
        "secs",
        "vs",
        "cf",
        "dr",
        "mr",
        "mrs",
        "ms",
        "no",
        "nos",
        "vol",
        "approx",
        "resp",
        "ch",
        "chap",
        "st",
        "jr",
        "inc",
        "ltd",
        "prof",
        "ref",
        "refs",
        "tab",
        "u.s",
    ]
)


@dataclass(frozen=True, slots=True)
class Segment:
    """``text[start:end]`` is a prose sentence or one non-prose element."""

    start: int
    end: int
    kind: str


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, end excluding the newline."""
    out: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        out.append((pos, pos + len(stripped)))
        pos += len(line)
    return out


def segments(text: str) -> list[Segment]:
    """Prose sentences and non-prose elements of ``text``, in order.

    Fenced code and ``$$`` maths are one segment each (whole, even if unclosed at
    the end of a chunk); tables, headings, directives, HTML and images are one
    segment per line. Prose paragraphs (blank-line separated, a list item starts a
    new one) are split into sentences.
    """
    out: list[Segment] = []
    para: list[tuple[int, int]] = []

    def flush() -> None:
        if para:
            out.extend(_split_paragraph(text, para[0][0], para[-1][1]))
            para.clear()

    lines = _lines(text)
    i = 0
    while i < len(lines):
        start, end = lines[i]
        line = text[start:end]
        fence = _FENCE.match(line)
        if fence:
            flush()
            mark = fence.group(1)
            j = i + 1
            while j < len(lines) and not text[lines[j][0] : lines[j][1]].lstrip().startswith(mark):
                j += 1
            j = min(j, len(lines) - 1)
            out.append(Segment(start, lines[j][1], CODE))
            i = j + 1
            continue
        if _MATH_OPEN.match(line):
            flush()
            rest = line.strip()[2:]
            j = i
            if "$$" not in rest:
                j = i + 1
                while j < len(lines) and "$$" not in text[lines[j][0] : lines[j][1]]:
                    j += 1
                j = min(j, len(lines) - 1)
            out.append(Segment(start, lines[j][1], MATH))
            i = j + 1
            continue
        if not line.strip():
            flush()
        elif _HEADING.match(line):
            flush()
            out.append(Segment(start, end, HEADING))
        elif _TABLE.match(line):
            flush()
            out.append(Segment(start, end, TABLE))
        elif _DIRECTIVE.match(line) or _HTML.match(line) or _IMAGE.match(line) or _RULE.match(line):
            flush()
            out.append(Segment(start, end, OTHER))
        else:
            item = _LIST_ITEM.match(line)
            if item:
                flush()
                start += item.end()
            para.append((start, end))
        i += 1
    flush()
    return out


def _split_paragraph(text: str, start: int, end: int) -> list[Segment]:
    out: list[Segment] = []
    cur = start
    for m in _END.finditer(text, start, end):
        stop = m.end()
        if text[m.start()] in _CJK_ENDS:
            if stop < end:  # 。 ends a sentence wherever it stands, spaces or not
                out.append(_trimmed(text, cur, stop))
                cur = stop
            continue
        if not _starts_sentence(text, stop, end) or _is_abbreviation(text, cur, m.start()):
            continue
        out.append(_trimmed(text, cur, stop))
        cur = stop
    out.append(_trimmed(text, cur, end))
    return [s for s in out if s.end > s.start]


_CJK_ENDS = frozenset("。！？")


def _starts_sentence(text: str, pos: int, end: int) -> bool:
    """After spaces and opening marks, an upper-case letter, a digit or an unspaced script."""
    m = _NEXT_STARTS.match(text, pos, end)
    if not m:
        return False
    ch = m.group(1)
    return ch.isupper() or ch.isdigit() or _caseless(ch)


def _caseless(ch: str) -> bool:
    """A letter of a script without case (Han, kana, Hangul, Arabic…)."""
    return ch.isalpha() and not ch.islower() and not ch.isupper()


def is_unspaced(text: str) -> bool:
    """Mostly written in a script without case or spaces (Japanese, Chinese…): such a
    sentence may well start with a lower-case identifier ("useState は…")."""
    letters = [ch for ch in text if ch.isalpha()]
    return bool(letters) and sum(map(_caseless, letters)) * 3 >= len(letters)


def word_count(text: str) -> int:
    """Words of a sentence: spaced words, with unspaced (CJK) text counted at two
    characters a word, so length limits mean about the same in every script."""
    count = 0
    for token in text.split():
        wide = sum(1 for ch in token if _caseless(ch))
        count += max(1, (wide + 1) // 2) if wide > 1 else 1
    return count


def _is_abbreviation(text: str, start: int, dot: int) -> bool:
    """True when the period at ``dot`` ends an abbreviation or an initial."""
    word = re.search(r"([A-Za-z][A-Za-z.]*)$", text[start:dot])
    if not word:
        return False
    w = word.group(1)
    return w.lower() in _ABBREVIATIONS or (len(w) == 1 and w.isupper())


def _trimmed(text: str, start: int, end: int) -> Segment:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Segment(start, end, PROSE)


def prose_sentences(text: str) -> list[Segment]:
    """Only the prose sentences of ``text``."""
    return [s for s in segments(text) if s.kind == PROSE]


# --- display ----------------------------------------------------------------------

_ROLE = re.compile(r"\s*:(cite|citet|citep|label|eqlabel):`[^`]*`")
_REF = re.compile(r":(numref|ref|eqref):`([^`]*)`")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_D2L_MARK = re.compile(r"[\[(]\*\*|\*\*[\])]")  # d2l's (**slide**) / [**slide**] marks
_PROTECTED = re.compile(r"(\$\$?[^$]+\$\$?|`[^`]*`)")
_REF_WORDS = {"fig": "the figure", "tab": "the table", "eq": "the equation", "sec": "that section"}


def _ref_words(m: re.Match[str]) -> str:
    if m.group(1) == "eqref":
        return "the equation"
    prefix = m.group(2).split("_", 1)[0].lower()
    return _REF_WORDS.get(prefix, "that section")


def clean_sentence(raw: str) -> str:
    """A sentence as a reader should see it in an answer.

    Whitespace collapsed; d2l roles (``:cite:``, ``:numref:``…) dropped or put in
    words; Markdown links reduced to their text; square brackets outside maths and
    code turned into parentheses, so nothing in an extracted sentence can be
    mistaken for a citation marker.
    """
    s = _D2L_MARK.sub("", _ROLE.sub("", raw))
    s = _REF.sub(_ref_words, s)
    s = _LINK.sub(lambda m: "" if m.group(0).startswith("!") else m.group(1), s)
    parts = _PROTECTED.split(s)
    for i in range(0, len(parts), 2):  # even indices lie outside maths and code
        parts[i] = parts[i].replace("[", "(").replace("]", ")")
    return " ".join("".join(parts).split())


def embed_key(text: str) -> str:
    """The form a sentence or claim is embedded in (and cached under): whitespace
    collapsed and the final punctuation dropped, so "X is Y." and "X is Y" share
    one vector."""
    return " ".join(text.split()).rstrip(" .!?;:")
