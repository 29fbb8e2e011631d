"""Answer-level evaluation on SciFact-style claims: are the citations right?

A claims folder holds ``claims_<split>.jsonl`` (``id``, ``claim``, ``evidence``:
``{doc_id: [{"sentences": [i, …], "label": …}]}``, ``cited_doc_ids``) and
``corpus_sentences.jsonl`` (``doc_id``, ``title``, ``abstract``: the abstract as a
list of sentences). Each claim is asked as a question; every citation of the
answer is mapped to the document of the chunk it cites and to the abstract
sentences its supporting span covers, then compared with the gold evidence:

* document level: precision = citations whose document holds evidence for the
  claim; recall = evidence documents cited at least once;
* sentence level: precision = citations whose supporting span covers an evidence
  sentence; recall = evidence sentences covered by some citation.

Both are micro-averaged over the claims that have evidence (claims without any
are counted, not scored); citations of a document without evidence are also
counted with the share the answerer flagged unsupported. Out-of-scope questions
measure the other duty: a question the corpus cannot answer must get the
fallback answer; the *distractor* protocol (:mod:`ragline.eval.distractor`)
asks each claim with evidence again with its evidence documents removed from the
results, where the fallback is the right answer too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ragline.eval.beir import BeirDocument, DatasetError, iter_jsonl
from ragline.types import Answer, Chunk

#: The out-of-scope questions shipped with ragline (general knowledge, cooking,
#: sport, travel, software: nothing a scientific-abstract corpus answers).
OUT_OF_SCOPE_FILE = "out_of_scope.jsonl"

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim and its gold evidence: document id → evidence sentence indices."""

    id: str
    text: str
    evidence: dict[str, frozenset[int]]


@dataclass(slots=True)
class ClaimsData:
    claims: list[Claim]
    sentences: dict[str, list[str]]  # doc id → abstract sentences
    titles: dict[str, str]

    def corpus(self) -> list[BeirDocument]:
        """The abstracts as documents (sentences joined by a space), for an index."""
        return [
            BeirDocument(d, self.titles.get(d, ""), " ".join(s)) for d, s in self.sentences.items()
        ]


def _int_list(value: Any, path: Path, line: int, what: str) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise DatasetError(path, line, f"{what} must be a list of integers, got {value!r}")
    return list(value)


def load_claims(folder: Path, split: str = "train") -> ClaimsData:
    """Claims of ``split`` and the abstracts' sentences, checked line by line."""
    if not folder.is_dir():
        raise DatasetError(folder, None, "not a folder")
    sent_path = folder / "corpus_sentences.jsonl"
    sentences: dict[str, list[str]] = {}
    titles: dict[str, str] = {}
    for no, obj in iter_jsonl(sent_path):
        if "doc_id" not in obj:
            raise DatasetError(sent_path, no, "missing field 'doc_id'")
        doc = str(obj["doc_id"])
        abstract = obj.get("abstract")
        if not isinstance(abstract, list) or not all(isinstance(s, str) for s in abstract):
            raise DatasetError(sent_path, no, "field 'abstract' must be a list of sentences")
        sentences[doc] = list(abstract)
        titles[doc] = str(obj.get("title") or "")
    claims_path = folder / f"claims_{split}.jsonl"
    claims: list[Claim] = []
    for no, obj in iter_jsonl(claims_path):
        if "id" not in obj or not isinstance(obj.get("claim"), str) or not obj["claim"].strip():
            raise DatasetError(claims_path, no, "each line needs 'id' and a non-empty 'claim'")
        raw = obj.get("evidence") or {}
        if not isinstance(raw, dict):
            raise DatasetError(claims_path, no, "field 'evidence' must be an object")
        evidence: dict[str, frozenset[int]] = {}
        for doc, sets in raw.items():
            if str(doc) not in sentences:
                raise DatasetError(
                    claims_path, no, f"evidence document {doc!r} is not in {sent_path.name}"
                )
            if not isinstance(sets, list):
                raise DatasetError(claims_path, no, f"evidence of {doc!r} must be a list")
            idx: set[int] = set()
            for ev in sets:
                if not isinstance(ev, dict):
                    raise DatasetError(claims_path, no, f"evidence of {doc!r}: expected objects")
                idx.update(_int_list(ev.get("sentences"), claims_path, no, "'sentences'"))
            n = len(sentences[str(doc)])
            if any(not 0 <= i < n for i in idx):
                raise DatasetError(
                    claims_path, no, f"evidence sentence index out of range for {doc!r} ({n})"
                )
            evidence[str(doc)] = frozenset(idx)
        claims.append(Claim(str(obj["id"]), obj["claim"], evidence))
    if not claims:
        raise DatasetError(claims_path, None, "no claims")
    return ClaimsData(claims, sentences, titles)


def load_questions(path: Path | None = None) -> list[str]:
    """Out-of-scope questions (``question`` per JSON line); ragline's own set by default."""
    if path is None:
        text = resources.files("ragline.eval").joinpath(OUT_OF_SCOPE_FILE).read_text("utf-8")
        return [str(json.loads(line)["question"]) for line in text.splitlines() if line.strip()]
    out: list[str] = []
    for no, obj in iter_jsonl(path):
        q = obj.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DatasetError(path, no, "missing or empty field 'question'")
        out.append(q)
    return out


def sentence_spans(body: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Where each sentence lies in ``body`` (searched in order; whitespace may differ).

    A sentence that cannot be found gets an empty span at the current position,
    so it can never be matched (and never shifts the others)."""
    squeezed, offsets = _squeeze(body)
    spans: list[tuple[int, int]] = []
    pos = 0
    for s in sentences:
        needle = _SPACE.sub(" ", s).strip()
        i = squeezed.find(needle, pos) if needle else -1
        if i < 0:
            at = offsets[min(pos, len(offsets) - 1)] if offsets else 0
            spans.append((at, at))
            continue
        end = i + len(needle)
        spans.append((offsets[i], offsets[end - 1] + 1))
        pos = end
    return spans


def _squeeze(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs made one space, and each kept char's offset."""
    out: list[str] = []
    offsets: list[int] = []
    prev_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if prev_space:
                continue
            out.append(" ")
            prev_space = True
        else:
            out.append(ch)
            prev_space = False
        offsets.append(i)
    return "".join(out), offsets


def covered(spans: Sequence[tuple[int, int]], start: int, end: int) -> set[int]:
    """Indices of the sentences overlapping ``[start, end)`` of the body."""
    return {i for i, (s, e) in enumerate(spans) if s < e and s < end and start < e}


@dataclass(frozen=True, slots=True)
class CitedSource:
    """One citation of an answer, resolved to a document and abstract sentences."""

    doc_id: str  # dataset document id ("" when the chunk is not a corpus document)
    sentences: frozenset[int]
    supported: bool = True  # the answerer's verdict on the citation


@dataclass(frozen=True, slots=True)
class AnsweredClaim:
    claim: Claim
    fallback: bool
    citations: tuple[CitedSource, ...]


def resolve_citations(
    answer: Answer,
    doc_of: Mapping[str, str],
    spans: Mapping[str, Sequence[tuple[int, int]]],
) -> tuple[CitedSource, ...]:
    """Each citation → (document, sentences its supporting span covers)."""
    chunks: dict[str, Chunk] = {s.hit.chunk.id: s.hit.chunk for s in answer.sources}
    out: list[CitedSource] = []
    for c in answer.citations:
        chunk = chunks.get(c.chunk_id)
        if chunk is None:
            out.append(CitedSource("", frozenset(), c.supported))
            continue
        doc = doc_of.get(chunk.doc_id, "")
        start = chunk.start_char + c.support_start
        end = chunk.start_char + c.support_end
        sents = frozenset(covered(spans.get(doc, ()), start, end))
        out.append(CitedSource(doc, sents, c.supported))
    return tuple(out)


@dataclass(slots=True)
class CitationScores:
    """Micro-averaged citation precision and recall against gold evidence."""

    claims: int = 0  # claims with evidence, scored
    claims_without_evidence: int = 0
    answered: int = 0  # scored claims that got an answer (not the fallback)
    citations: int = 0
    doc_precision: float = 0.0
    doc_recall: float = 0.0
    sentence_precision: float = 0.0
    sentence_recall: float = 0.0
    citations_without_evidence: int = 0  # citations of a document with no evidence
    flagged_without_evidence: float = 0.0  # share of those marked unsupported
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "claims": self.claims,
            "claims_without_evidence": self.claims_without_evidence,
            "answered": self.answered,
            "citations": self.citations,
            "doc_precision": round(self.doc_precision, 4),
            "doc_recall": round(self.doc_recall, 4),
            "sentence_precision": round(self.sentence_precision, 4),
            "sentence_recall": round(self.sentence_recall, 4),
            "citations_without_evidence": self.citations_without_evidence,
            "flagged_without_evidence": round(self.flagged_without_evidence, 4),
            **{k: round(v, 4) for k, v in self.extra.items()},
        }


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def score_citations(answers: Iterable[AnsweredClaim]) -> CitationScores:
    """Precision and recall at document and sentence level (see the module docstring).

    A citation is sentence-correct when its span covers at least one evidence
    sentence of its document for the claim; an evidence sentence is recalled
    when any citation's span covers it."""
    s = CitationScores()
    cites = doc_hits = sent_hits = wrong = wrong_flagged = 0
    gold_docs = docs_found = gold_sents = sents_found = 0
    for a in answers:
        ev = a.claim.evidence
        if not ev:
            s.claims_without_evidence += 1
            continue
        s.claims += 1
        s.answered += not a.fallback
        cited_docs: set[str] = set()
        cited_sents: set[tuple[str, int]] = set()
        for c in a.citations:
            cites += 1
            if c.doc_id not in ev:
                wrong += 1
                wrong_flagged += not c.supported
            if c.doc_id in ev:
                doc_hits += 1
                cited_docs.add(c.doc_id)
                good = c.sentences & ev[c.doc_id]
                sent_hits += bool(good)
                cited_sents.update((c.doc_id, i) for i in good)
        gold_docs += len(ev)
        docs_found += len(cited_docs)
        gold_sents += sum(len(v) for v in ev.values())
        sents_found += len(cited_sents)
    s.citations = cites
    s.doc_precision = _ratio(doc_hits, cites)
    s.doc_recall = _ratio(docs_found, gold_docs)
    s.sentence_precision = _ratio(sent_hits, cites)
    s.sentence_recall = _ratio(sents_found, gold_sents)
    s.citations_without_evidence = wrong
    s.flagged_without_evidence = _ratio(wrong_flagged, wrong)
    return s


def answerability(
    answerable: Sequence[float], distractor: Sequence[float], max_fallback: float = 0.05
) -> tuple[float, float]:
    """(AUC, abstention): how well a score separates questions the documents answer from
    the same questions with their evidence gone; and the share of the latter below the
    highest bar that leaves at most ``max_fallback`` of the former below it."""
    if not answerable or not distractor:
        return float("nan"), float("nan")
    wins = sum((a > d) + 0.5 * (a == d) for a in answerable for d in distractor)
    ranked = sorted(answerable)
    bar = ranked[int(max_fallback * len(ranked))]
    return wins / (len(answerable) * len(distractor)), sum(d < bar for d in distractor) / len(
        distractor
    )


@dataclass(slots=True)
class GeneratorAnswers:
    """One generator's results over the claims and the out-of-scope questions."""

    generator: str
    scores: CitationScores
    fallback_out_of_scope: float
    out_of_scope: int
    fallback_in_scope: float  # claims with evidence that got the fallback (should be low)
    latency_ms: dict[str, float]
    distractor_claims: int = 0  # claims asked again with their evidence documents removed
    abstention_distractor: float = 0.0  # share of those that got the fallback (should be high)
    #: The confidence score as an answerability test: AUC of claims with their evidence
    #: against the same claims without it, and the distractor abstention a bar on the
    #: score would reach while ≤ 5 % of the answerable claims fall back.
    answerability_auc: float = float("nan")
    abstention_at_5pct: float = float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "generator": self.generator,
            **self.scores.to_dict(),
            "out_of_scope_questions": self.out_of_scope,
            "fallback_rate_out_of_scope": round(self.fallback_out_of_scope, 4),
            "fallback_rate_in_scope": round(self.fallback_in_scope, 4),
            "distractor_claims": self.distractor_claims,
            "abstention_rate_distractor": round(self.abstention_distractor, 4),
            "answerability_auc": round(self.answerability_auc, 4),
            "abstention_at_5pct_fallback": round(self.abstention_at_5pct, 4),
            "latency_ms": {k: round(v, 2) for k, v in self.latency_ms.items()},
        }


@dataclass(slots=True)
class AnswersReport:
    claims_dir: str
    split: str
    claims: int
    index: dict[str, Any]
    results: list[GeneratorAnswers]
    settings: dict[str, Any]
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "claims_dir": self.claims_dir,
            "split": self.split,
            "claims": self.claims,
            "index": self.index,
            "settings": self.settings,
            "generators": {r.generator: r.to_dict() for r in self.results},
            "seconds": round(self.seconds, 2),
        }
