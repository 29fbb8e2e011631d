"""Evidence checks on the question's constraints: what a reader would look for, as pure functions.

The question's **constraints** (years, numbers, quoted phrases, named entities)
must be met by the evidence sentence or its passage, and its **expected answer
type** (who → a name, when → a date, how many → a number, where → a place) must
be in the sentence. :mod:`ragline.answer.evidence` weighs these with coverage
and relevance into one verdict; see its docstring for why heuristics, not NER.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from ragline.text.bm25 import tokenize
from ragline.text.language import query_language

if TYPE_CHECKING:
    pass

PERSON = "person"
DATE = "date"
NUMBER = "number"
PLACE = "place"
EXPANSION = "expansion"  # "What does VGG stand for?"

#: Nouns that make a which/what question ask for a name ("Which statistician…").
_AGENTS = (
    "person",
    "people",
    "researcher",
    "researchers",
    "scientist",
    "statistician",
    "mathematician",
    "author",
    "inventor",
    "company",
    "university",
    "lab",
    "laboratory",
    "organization",
    "organisation",
)
_SMALL_WORDS = frozenset(["of", "from", "the", "a", "an", "and", "for", "to", "in", "on"])
_TOKEN = re.compile(r"[A-Za-z]+|\d[\d,.]*")

#: A year: not part of a longer number or a decimal ("12018", "0.2014"), but one that
#: ends a citation key ("Srivastava.Hinton.Krizhevsky.ea.2014") counts.
_YEAR = re.compile(r"(?<![\d,])(?<!\d\.)(1[5-9]\d\d|20\d\d)(?:s\b|(?![\d.,]\d))")
_NUM = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w])\s*(%|percent\b)?")
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,80})[\"“”]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’\-]*")
#: A word of a question in another language: letters of any script ("Blockgeräte"
#: whole, not cut at "ä"). English keeps the ASCII words the judge was fitted with.
_ANY_WORD = re.compile(r"[^\W\d_](?:[^\W_]|['’\-])*")
#: Languages that capitalise every noun: a capital there says nothing of a name.
_NOUNS_CAPITALISED = frozenset({"de", "lb"})
_MONTHS = frozenset(
    """january february march april may june july august september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec""".split()  # noqa: SIM905
)
_NUMBER_WORDS = {
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "hundred": "100",
    "thousand": "1000",
    "million": "1000000",
    "billion": "1000000000",
    "half": "0.5",
    "dozen": "12",
}
#: "When should I use a ref…", "When do treaties apply?": a when-question with a modal or
#: "do" asks for a condition or a moment in a process, not a date (SQuAD 2.0 dev: the 3
#: answerable "when do" questions are answered by a condition, none by a date).
_WHEN_CONDITION = r"(?:should|shall|can|could|would|must|may|might|do|does|to)\b"
_QUESTION_START = re.compile(
    r"^(what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could"
    r"|should|would|will|has|have|had)\b"
)
#: Capitalised words that are sentence furniture, not names.
_NOT_NAMES = frozenset(
    """a an the this that these those what which who whom whose when where why how is
    are was were do does did can could should would will in on at for of and or
    but if it its we you they he she i our their there here as by to from with
    about after before during between since until yes no not also however then
    thus so first second given let each every both either one two some many most
    such other""".split()  # noqa: SIM905
)


#: Analysed forms of question words the BM25 stop list keeps ("does" → "doe").
_QUESTION_TERMS = frozenset(
    tokenize("does many much what which how why when where who whose mean meaning called")
)


@lru_cache(maxsize=8192)
def terms_of(text: str) -> tuple[str, ...]:
    """``tokenize(text)`` remembered: one question's check analyses the same
    sentences and passages many times over (each sentence's passage, the BM25
    and rarity statistics, the citation check), and analysis was a third of it."""
    return tuple(tokenize(text))


@lru_cache(maxsize=8192)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``text`` (see :func:`terms_of`). Terms never span a
    line break, so a text joined from parts with ``"\n"`` has the union of theirs."""
    return frozenset(terms_of(text))


@dataclass(frozen=True, slots=True)
class Constraints:
    """What a question (or a claim) pins down, beyond its topic."""

    years: frozenset[str] = frozenset()
    numbers: frozenset[str] = frozenset()  # normalised, years excluded
    quoted: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()  # as written
    terms: tuple[str, ...] = ()  # analysed content terms, order kept, unique
    answer_type: str | None = None
    question: bool = True  # False for a statement (a claim to check)
    #: The text is English: the learned scorer was fitted on English data only.
    english: bool = True


def normalise_number(whole: str, frac: str | None = None, percent: bool = False) -> str:
    """``"1,000"`` → ``"1000"``, ``"2.50"`` → ``"2.5"``, ``"5 %"`` → ``"5%"``."""
    n = whole.replace(",", "").lstrip("0") or "0"
    f = (frac or "").rstrip("0")
    return (f"{n}.{f}" if f else n) + ("%" if percent else "")


def years(text: str) -> set[str]:
    """Four-digit years 1500–2099 ("the 1990s" gives 1990)."""
    return {m.group(1) for m in _YEAR.finditer(text)}


def numbers(text: str) -> set[str]:
    """Numbers other than years, normalised; number words count ("two" → 2)."""
    out = _digit_numbers(text)
    for w in _WORD.findall(text.lower()):
        if w in _NUMBER_WORDS:
            out.add(_NUMBER_WORDS[w])
    return out


def entities(text: str, language: str = "en") -> list[str]:
    """Name-like words: acronyms and mixed case anywhere ("BERT", "PrP", "ResNet"),
    capitalised words except at a sentence start; runs of them join ("Elena Rybakina").
    In German every noun is capitalised, so there only acronyms and mixed case count
    ("Welche Datei enthält die Voreinstellungen des SSH-Servers?" names SSH, not
    Datei or Voreinstellungen); non-English text keeps its non-ASCII letters."""
    nouns_capitalised = language in _NOUNS_CAPITALISED
    out: list[str] = []
    run: list[str] = []
    prev_end = -1
    sentence_start = True
    for m in (_WORD if language == "en" else _ANY_WORD).finditer(text):
        w = m.group(0).strip("'’-")
        while "-" in w and w.rsplit("-", 1)[1].islower():  # "RMSProp-style" names RMSProp
            w = w.rsplit("-", 1)[0]
        if nouns_capitalised and "-" in w:  # "SSH-Servers" names SSH; "Exit-Status" nothing
            w = next((p for p in w.split("-") if any(c.isupper() for c in p[1:])), w)
        gap = text[prev_end : m.start()] if prev_end >= 0 else ""
        if prev_end >= 0 and re.search(r"[.!?:;]\s*$", gap):
            sentence_start = True
        parts = w.split("-") if nouns_capitalised else [w]
        inner_caps = any(c.isupper() for part in parts for c in part[1:])
        capital = w[:1].isupper() and w.lower() not in _NOT_NAMES and not nouns_capitalised
        name = len(w) > 1 and (inner_caps or (capital and not sentence_start))
        if name and (not run or not gap.strip()):
            run.append(w)
        else:
            if run:
                out.append(" ".join(run))
            run = [w] if name else []
        sentence_start = False
        prev_end = m.end()
    if run:
        out.append(" ".join(run))
    return list(dict.fromkeys(out))


def expected_answer_type(question: str) -> str | None:
    """The kind of answer a wh-question asks for (None: a definition, a reason…)."""
    q = " ".join(question.lower().split())
    if re.match(
        rf"^(in )?(what|which) year\b|^when\b(?! {_WHEN_CONDITION})|^(on|in) what date\b", q
    ):
        return DATE
    if re.match(r"^how (many|much|long|large|big|old|often|far)\b", q) or re.match(
        r"^(what|which) (percentage|fraction|proportion|share|number)\b", q
    ):
        return NUMBER
    if re.match(r"^who\b|^whom\b|^whose\b", q) or re.match(
        rf"^(what|which) (\w+ )?({'|'.join(_AGENTS)})\b", q
    ):
        return PERSON
    if re.match(r"^where\b|^(in )?(what|which) (country|city|place|town)\b", q):
        return PLACE
    if re.match(r"^what (does|do|did) \S+ stand for\b", q):
        return EXPANSION
    return None


def focus_terms(question: str) -> tuple[str, ...]:
    """What a how-many question counts: the analysed words after "how many" up to
    the verb or preposition ("How many output channels does…" → output, channel).

    A how-much question has none: it asks for a quantity, which its answer gives in a
    unit ("How much water…?" → "4 litres"), not by naming the thing measured again."""
    m = re.match(
        r"^how many (.+?)(?: (?:does|do|did|is|are|was|were|has|have|had|can|will"
        r"|would|should|of|in|on|for|from|with|by|replace|replaces)\b|[?.,]|$)",
        " ".join(question.lower().split()),
    )
    return tuple(tokenize(m.group(1))) if m else ()


def _counts(text: str, focus: Sequence[str], window: int = 5) -> bool:
    """A number in ``text`` followed within ``window`` words by every focus term."""
    words = _TOKEN.findall(text)
    for i, w in enumerate(words):
        if w[0].isdigit() or w.lower() in _NUMBER_WORDS:
            after = {t for x in words[i + 1 : i + 1 + window] for t in terms_of(x)}
            if all(f in after for f in focus):
                return True
    return False


def _spells(text: str, acronym: str) -> bool:
    """True when consecutive words of ``text`` (small words skipped) start with the
    capitals of ``acronym`` in order: "Visual Geometry Group" spells VGG."""
    letters = [c.lower() for c in acronym if c.isupper()]
    if len(letters) < 2:
        return False
    initials = [w[0].lower() for w in _WORD.findall(text) if w.lower() not in _SMALL_WORDS]
    n = len(letters)
    return any(initials[i : i + n] == letters for i in range(len(initials) - n + 1))


def question_constraints(question: str) -> Constraints:
    """The constraints of a question or claim (see the module docstring)."""
    language = query_language(question)
    return Constraints(
        years=frozenset(years(question)),
        numbers=frozenset(numbers(question)),
        quoted=tuple(dict.fromkeys(m.group(1).strip() for m in _QUOTED.finditer(question))),
        entities=tuple(entities(question, language)),
        terms=tuple(t for t in dict.fromkeys(tokenize(question)) if t not in _QUESTION_TERMS),
        answer_type=expected_answer_type(question),
        question=is_question(question),
        english=language == "en",
    )


def is_question(text: str) -> bool:
    """A question (ends with "?" or opens with a wh-word or an auxiliary), not a claim."""
    t = text.strip().lower()
    return t.endswith("?") or re.match(_QUESTION_START, t) is not None


def has_answer_type(text: str, kind: str | None, question: str = "") -> bool:
    """True when ``text`` holds something of the expected answer type: a date; a
    number not given in the question (counting what a how-many question counts); a
    name that shares no word with the question (who, which researcher…, where);
    the words an asked-for acronym stands for."""
    if kind is None:
        return True
    if kind == DATE:
        words = set(_WORD.findall(text.lower()))
        return bool(years(text)) or bool(words & _MONTHS)
    if kind == NUMBER:
        given = numbers(question) | years(question)
        if not (numbers(text) | years(text)) - given:
            return False
        focus = focus_terms(question)
        return _counts(text, focus) if focus else True
    if kind == EXPANSION:
        asked = [e for e in entities(question) if any(c.isupper() for c in e)]
        return any(_spells(text, a) for a in asked)
    asked_terms = term_set(question)
    return any(not term_set(e) & asked_terms for e in entities(text))


def _contains(haystack: str, needle: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(needle.lower()) + r"(?!\w)", haystack) is not None


def unmet(c: Constraints, sentence: str, passage: str) -> list[str]:
    """Constraints neither the sentence nor its passage meets, as written in the
    question: years, quoted phrases and entities must appear (an acronym may appear
    spelled out in the passage)."""
    where = f"{sentence}\n{passage}".lower()
    have_years = years(where)
    missing = [y for y in sorted(c.years) if y not in have_years]
    missing += [q for q in c.quoted if not _contains(where, q)]
    if not c.entities:
        return missing
    stems = term_set(sentence.lower()) | term_set(passage.lower())
    for e in c.entities:
        terms = terms_of(e)
        if _contains(where, e) or (terms and all(t in stems for t in terms)):
            continue
        if e.isalpha() and sum(ch.isupper() for ch in e) >= 2 and _spells(passage, e):
            continue  # an acronym met by its expansion: DCGAN in "Deep Convolutional GANs"
        missing.append(e)
    return missing


def contradicted(claim: str, span: str) -> list[str]:
    """Years and numbers of ``claim`` that ``span`` contradicts: the span states
    numbers of the same kind and none of them is the claim's."""
    out: list[str] = []
    cy, sy = years(claim), years(span)
    if cy and sy and not cy & sy:
        out += sorted(cy)
    cn, sn = _digit_numbers(claim), _digit_numbers(span)
    if cn and sn and not cn & sn:
        out += sorted(cn)
    return out


def _digit_numbers(text: str) -> set[str]:
    """Numbers written in digits, years excluded ("5 billion" and "6 billion" differ)."""
    ys = years(text)
    return {
        normalise_number(m.group(1), m.group(2), bool(m.group(3)))
        for m in _NUM.finditer(text)
        if m.group(1) not in ys
    }
