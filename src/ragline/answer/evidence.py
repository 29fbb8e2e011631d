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

The constraint and answer-type checks live in :mod:`ragline.answer.evidence_checks`;
this module holds coverage, relevance, the verdict and the learned scorer, and
re-exports the checks' names so callers import everything from here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragline.answer.evidence_checks import (
    DATE,
    EXPANSION,
    NUMBER,
    PERSON,
    PLACE,
    Constraints,
    contradicted,
    entities,
    expected_answer_type,
    focus_terms,
    has_answer_type,
    is_question,
    numbers,
    question_constraints,
    term_set,
    terms_of,
    unmet,
    years,
)
from ragline.text.bm25 import tf_weight

if TYPE_CHECKING:
    from ragline.settings import AnswerSettings


__all__ = [
    "DATE",
    "EXPANSION",
    "FEATURES",
    "NUMBER",
    "PERSON",
    "PLACE",
    "SCORER",
    "Constraints",
    "Evidence",
    "EvidenceWeights",
    "LogisticScorer",
    "TermWeights",
    "best_evidence",
    "bm25_scores",
    "contradicted",
    "coverage",
    "coverage_of",
    "entities",
    "evidence_score",
    "evidence_weights",
    "expected_answer_type",
    "focus_terms",
    "has_answer_type",
    "is_question",
    "judge",
    "numbers",
    "question_constraints",
    "rescore",
    "sentence_features",
    "standout",
    "term_set",
    "terms_of",
    "unmet",
    "why_not",
    "years",
]

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


def evidence_weights(settings: AnswerSettings) -> EvidenceWeights:
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
