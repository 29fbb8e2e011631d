"""Evidence: does this sentence answer this question (or support this claim)?

Retrieval finds passages on the right *topic*; a passage about the 2022 final
does not answer a question about 2018, and a cosine cannot tell them apart.
This module judges evidence with checks a reader would make, as pure functions:

* **constraints** of the question must be met by the evidence sentence or its
  passage: years, numbers, quoted phrases and named entities (capitalised or
  mixed-case words, acronyms) — the parts a topical distractor gets wrong;
* the **expected answer type** must be present in the sentence (who → a name,
  when → a date, how many/much → a number, where → a place name);
* **key-term coverage**: the question's content terms, weighted by how rare they
  are among the retrieved sentences (a term every passage repeats is the topic,
  one no passage holds is what is missing), found in the sentence and in its
  passage;
* **sentence relevance**: BM25 over the retrieved sentences plus embedding
  cosine; a passage is represented by its best sentence.

No English NER pipeline ships as an offline package with its model here, so
names are found with capitalisation heuristics, numbers and dates with regular
expressions; terms use the BM25 analyser (Snowball stems, stop words dropped)
so "networks" meets "network". The weights and the threshold of
:func:`evidence_score` are calibrated in benchmarks/calibrate_evidence.py.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from ragline.text.bm25 import tf_weight, tokenize
from ragline.text.language import query_language

if TYPE_CHECKING:
    from ragline.settings import Settings

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


def entities(text: str) -> list[str]:
    """Name-like words: acronyms and mixed case anywhere ("BERT", "PrP", "ResNet"),
    capitalised words except at a sentence start; runs of them join ("Elena Rybakina")."""
    out: list[str] = []
    run: list[str] = []
    prev_end = -1
    sentence_start = True
    for m in _WORD.finditer(text):
        w = m.group(0).strip("'’-")
        while "-" in w and w.rsplit("-", 1)[1].islower():  # "RMSProp-style" names RMSProp
            w = w.rsplit("-", 1)[0]
        gap = text[prev_end : m.start()] if prev_end >= 0 else ""
        if prev_end >= 0 and re.search(r"[.!?:;]\s*$", gap):
            sentence_start = True
        inner_caps = any(c.isupper() for c in w[1:])
        capital = w[:1].isupper() and w.lower() not in _NOT_NAMES
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
    if re.match(r"^(in )?(what|which) year\b|^when\b|^(on|in) what date\b", q):
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
    the verb or preposition ("How many output channels does…" → output, channel)."""
    m = re.match(
        r"^how (?:many|much) (.+?)(?: (?:does|do|did|is|are|was|were|has|have|had|can|will"
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
    return Constraints(
        years=frozenset(years(question)),
        numbers=frozenset(numbers(question)),
        quoted=tuple(dict.fromkeys(m.group(1).strip() for m in _QUOTED.finditer(question))),
        entities=tuple(entities(question)),
        terms=tuple(t for t in dict.fromkeys(tokenize(question)) if t not in _QUESTION_TERMS),
        answer_type=expected_answer_type(question),
        question=is_question(question),
        english=query_language(question) == "en",
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


# --- relevance and coverage ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TermWeights:
    """Rarity of terms among the retrieved sentences: ``log(1 + (N − df + ½)/(df + ½))``
    (BM25's idf); a term no sentence holds gets the largest weight."""

    df: dict[str, int]
    n: int

    @classmethod
    def of(cls, sentences: Iterable[str]) -> TermWeights:
        df: Counter[str] = Counter()
        n = 0
        for s in sentences:
            n += 1
            df.update(term_set(s))
        return cls(dict(df), n)

    def weight(self, term: str) -> float:
        n, df = max(self.n, 1), self.df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def coverage(terms: Sequence[str], text: str, weights: TermWeights) -> float:
    """Share (0…1) of the terms' total weight that ``text`` contains."""
    return coverage_of(terms, term_set(text), weights)


def coverage_of(terms: Sequence[str], have: Set[str], weights: TermWeights) -> float:
    """:func:`coverage` of a text whose distinct terms are ``have``."""
    if not terms:
        return 1.0
    total = sum(weights.weight(t) for t in terms)
    if total <= 0:
        return 1.0
    return sum(weights.weight(t) for t in terms if t in have) / total


def bm25_scores(
    terms: Sequence[str], sentences: Sequence[str], weights: TermWeights
) -> list[float]:
    """BM25 of the question terms against each sentence (statistics of these sentences)."""
    toks = [terms_of(s) for s in sentences]
    avg = sum(len(t) for t in toks) / len(toks) if toks else 1.0
    out = []
    for t in toks:
        tf = Counter(t)
        out.append(
            sum(weights.weight(q) * tf_weight(tf[q], len(t), max(avg, 1.0)) for q in terms if tf[q])
        )
    return out


def standout(scores: Sequence[float], i: int) -> float:
    """How far sentence ``i`` beats the best other sentence of its passage
    (its own score when it is the passage's only sentence)."""
    others = [s for j, s in enumerate(scores) if j != i]
    return scores[i] - max(others) if others else scores[i]


# --- the verdict -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EvidenceWeights:
    """Calibrated weights of :func:`evidence_score` and its threshold."""

    sentence_coverage: float = 0.4
    passage_coverage: float = 0.2
    cosine: float = 0.4
    threshold: float = 0.5  # for a question
    claim_threshold: float = 0.5  # for a statement (a claim to check)
    #: When set, the score is this scorer's probability where :meth:`learned_for`.
    scorer: LogisticScorer | None = None
    #: The scorer judges statements (claims) only; questions keep the weighted score.
    scorer_claims_only: bool = False
    learned_threshold: float = 0.5  # the scorer's bar for a question
    learned_claim_threshold: float = 0.5  # the scorer's bar for a statement

    def learned_for(self, c: Constraints) -> bool:
        """Whether the learned scorer judges this question or claim: it was fitted on
        English claims and questions, so other languages keep the weighted score."""
        return (
            self.scorer is not None and c.english and not (self.scorer_claims_only and c.question)
        )

    def learned_bar(self, c: Constraints) -> float:
        """The learned scorer's threshold for this question or claim."""
        return self.learned_threshold if c.question else self.learned_claim_threshold


@dataclass(frozen=True, slots=True)
class Evidence:
    """One candidate sentence judged against the question."""

    index: int  # into the sentences judged
    score: float
    answers: bool
    sentence_coverage: float
    passage_coverage: float
    cosine: float
    missing: tuple[str, ...] = ()  # unmet constraints
    type_ok: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)


def evidence_score(
    sentence_coverage: float, passage_coverage: float, cosine: float, w: EvidenceWeights
) -> float:
    """``a·sentence coverage + b·passage coverage + c·max(cosine, 0)``."""
    return (
        w.sentence_coverage * sentence_coverage
        + w.passage_coverage * passage_coverage
        + w.cosine * max(cosine, 0.0)
    )


def judge(
    c: Constraints,
    question: str,
    sentences: Sequence[str],
    passages: Sequence[str],
    cosines: Sequence[float],
    weights: TermWeights,
    w: EvidenceWeights,
) -> list[Evidence]:
    """Every sentence judged: ``sentences[i]`` lies in ``passages[i]`` (its chunk,
    title included) and has embedding cosine ``cosines[i]`` with the question.

    Unmet constraints veto a question's answer; for a statement (a claim to check)
    only the score decides: calibrated on SciFact train, vetoing claims on their
    names cost 7 % of the answerable claims for 27 % of the distractors, where
    the score alone holds 5 % for a third (benchmarks/calibrate_evidence.py)."""
    out: list[Evidence] = []
    for i, (s, p, cos) in enumerate(zip(sentences, passages, cosines, strict=True)):
        sc = coverage(c.terms, s, weights)
        pc = coverage_of(c.terms, term_set(s) | term_set(p), weights)  # s + "\n" + p
        score = evidence_score(sc, pc, cos, w)
        missing = tuple(unmet(c, s, p))
        type_ok = has_answer_type(s, c.answer_type, question)
        bar = w.threshold if c.question else w.claim_threshold
        ok = score >= bar and type_ok and not (missing and c.question)
        out.append(Evidence(i, score, ok, sc, pc, cos, missing, type_ok))
    return out


def best_evidence(judged: Sequence[Evidence]) -> Evidence | None:
    """The answering sentence with the best score, else the best-scoring one."""
    if not judged:
        return None
    answering = [e for e in judged if e.answers]
    return max(answering or judged, key=lambda e: e.score)


def why_not(c: Constraints, e: Evidence | None, passage_text: str) -> str:
    """Why the best candidate does not answer, in words a person can read."""
    if e is None:
        return "no retrieved passage has a sentence to check"
    if e.missing:
        found = sorted(years(passage_text) - set(c.years))
        if c.years and found and any(m in c.years for m in e.missing):
            return f"the passages cover {', '.join(found[:3])}, not {', '.join(sorted(c.years))}"
        return "the passages do not mention " + ", ".join(f"'{m}'" for m in e.missing[:3])
    if not e.type_ok:
        kind = {
            PERSON: "a name",
            DATE: "a date",
            NUMBER: "a number",
            PLACE: "a place",
            EXPANSION: "what it stands for",
        }
        return f"no passage sentence gives {kind.get(c.answer_type or '', 'the answer')}"
    return (
        f"no passage sentence answers the question (best evidence {e.score:.2f}; "
        f"key terms covered {e.sentence_coverage:.0%})"
    )


# --- the learned scorer ------------------------------------------------------------

#: Features of a candidate sentence, in the order of :class:`LogisticScorer`'s weights.
FEATURES = (
    "sentence_coverage",  # key-term coverage of the sentence
    "passage_coverage",  # … of the sentence and its passage
    "cosine",  # sentence–question embedding cosine (≥ 0)
    "block_cosine",  # the sentence's chunk–question cosine (the retriever's view)
    "bm25",  # sentence BM25 / the best sentence's BM25 in the context
    "bm25_standout",  # BM25 lead over the passage's best other sentence (same scale)
    "cosine_standout",  # cosine lead over the passage's best other sentence
    "cosine_gap",  # cosine minus the best cosine in the context (≤ 0)
    "type_ok",  # the expected answer type is present
    "constraints_met",  # no unmet year, quoted phrase or name
    "block_rank",  # 1 / the block's number (blocks are numbered best first)
    "first_in_block",  # the passage's first candidate sentence
)


@dataclass(frozen=True, slots=True)
class LogisticScorer:
    """``P(sentence answers) = σ(intercept + Σ wᵢ·featureᵢ)`` over :data:`FEATURES`:
    a dozen interpretable numbers, fitted in benchmarks/fit_evidence_scorer.py."""

    weights: tuple[float, ...]
    intercept: float

    def score(self, features: Sequence[float]) -> float:
        z = self.intercept + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-max(min(z, 30.0), -30.0)))


def sentence_features(
    judged: Sequence[Evidence],
    blocks: Sequence[int],
    bm25: Sequence[float],
    block_cosines: Sequence[float],
    question: bool = True,
) -> list[tuple[float, ...]]:
    """The :data:`FEATURES` of every judged sentence: ``blocks[i]`` is the number of
    sentence i's block (1 = best), ``block_cosines[i]`` its chunk's cosine to the
    question. Standouts compare a sentence with the other sentences of its passage:
    the one that answers stands out from its neighbours, a topical passage does not."""
    if not judged:
        return []
    top_bm25 = max(max(bm25), 1e-9)
    cos = [max(e.cosine, 0.0) for e in judged]
    top_cos = max(cos)
    by_block: dict[int, list[int]] = {}
    for i, b in enumerate(blocks):
        by_block.setdefault(b, []).append(i)
    out: list[tuple[float, ...]] = []
    for i, e in enumerate(judged):
        mates = by_block[blocks[i]]
        others = [j for j in mates if j != i]
        bm_lead = bm25[i] - max((bm25[j] for j in others), default=0.0)
        cos_lead = cos[i] - max((cos[j] for j in others), default=0.0)
        out.append(
            (
                e.sentence_coverage,
                e.passage_coverage,
                cos[i],
                max(block_cosines[i], 0.0),
                bm25[i] / top_bm25,
                bm_lead / top_bm25,
                cos_lead,
                cos[i] - top_cos,
                float(e.type_ok),
                float(not (e.missing and question)),
                1.0 / max(blocks[i], 1),
                float(mates[0] == i),
            )
        )
    return out


def rescore(
    c: Constraints,
    judged: Sequence[Evidence],
    features: Sequence[Sequence[float]],
    scorer: LogisticScorer,
    w: EvidenceWeights,
) -> list[Evidence]:
    """``judged`` with the learned probability as the score; the verdict keeps the
    vetoes of :func:`judge` (unmet constraints of a question, a missing answer type)."""
    bar = w.learned_bar(c)
    out = []
    for e, f in zip(judged, features, strict=True):
        p = scorer.score(f)
        ok = p >= bar and e.type_ok and not (e.missing and c.question)
        out.append(
            Evidence(
                e.index,
                p,
                ok,
                e.sentence_coverage,
                e.passage_coverage,
                e.cosine,
                e.missing,
                e.type_ok,
                e.notes,
            )
        )
    return out


#: Fitted by benchmarks/fit_evidence_scorer.py (benchmarks/results/evidence_scorer.md).
SCORER = LogisticScorer(
    weights=(
        0.1993,  # sentence_coverage
        3.389,  # passage_coverage
        2.1429,  # cosine
        1.8688,  # block_cosine
        0.0231,  # bm25
        1.6548,  # bm25_standout
        1.3171,  # cosine_standout
        -1.9997,  # cosine_gap
        2.2564,  # type_ok
        0.3857,  # constraints_met
        1.9975,  # block_rank
        -0.2886,  # first_in_block
    ),
    intercept=-11.0231,
)


def evidence_weights(settings: Settings) -> EvidenceWeights:
    """The evidence check as configured: the learned scorer and its thresholds, the
    hand-weighted score and its own, or (claims-learned) the learned scorer for
    statements and the weighted score for questions. The weighted thresholds stay
    set in every mode: they judge what the learned scorer does not (non-English)."""
    mode = settings.evidence_scorer
    return EvidenceWeights(
        sentence_coverage=settings.evidence_sentence_weight,
        passage_coverage=settings.evidence_passage_weight,
        cosine=settings.evidence_cosine_weight,
        threshold=settings.evidence_threshold,
        claim_threshold=settings.evidence_claim_threshold,
        scorer=None if mode == "weighted" else SCORER,
        scorer_claims_only=mode == "claims-learned",
        learned_threshold=settings.evidence_learned_threshold,
        learned_claim_threshold=settings.evidence_learned_claim_threshold,
    )
