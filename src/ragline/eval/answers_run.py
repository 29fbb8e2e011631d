"""Ask every claim (and every out-of-scope question) through the real answer pipeline."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from ragline.engine import AnswerHooks, Ragline
from ragline.eval.answers import (
    AnsweredClaim,
    Claim,
    ClaimsData,
    GeneratorAnswers,
    answerability,
    resolve_citations,
    score_citations,
    sentence_spans,
)
from ragline.eval.distractor import without
from ragline.eval.index import EvalIndex
from ragline.eval.runs import percentiles
from ragline.types import Hit

#: progress(done, total, label)
AnswerProgress = Callable[[int, int, str], None]


def generators_to_run(configured: str) -> list[str]:
    """The extractive generator always (it needs no model), plus the configured one."""
    return ["extractive"] if configured == "extractive" else ["extractive", configured]


def run_answers(
    claims: Sequence[Claim],
    data: ClaimsData,
    bodies: Mapping[str, str],
    questions: Sequence[str],
    index: EvalIndex,
    *,
    progress: AnswerProgress | None = None,
    distractor: bool = True,
) -> list[GeneratorAnswers]:
    """Scores per generator. ``bodies`` holds the indexed text of each document (the
    text the chunks' offsets refer to), to locate the abstract sentences in it. With
    ``distractor``, every claim with evidence is asked once more with its evidence
    documents removed from the results (the fallback is then the right answer)."""
    spans = {
        doc: sentence_spans(bodies[doc], sents)
        for doc, sents in data.sentences.items()
        if doc in bodies
    }
    base = index.rag
    results: list[GeneratorAnswers] = []
    for name in generators_to_run(base.settings.generator):
        rag = (
            base
            if name == base.settings.generator
            else Ragline(
                base.settings.model_copy(update={"generator": name}),
                embedder=base.embedder,
                store=base.store,
            )
        )
        scored_claims = [c for c in claims if c.evidence] if distractor else []
        total = len(claims) + len(questions) + len(scored_claims)
        answered: list[AnsweredClaim] = []
        latencies: list[float] = []
        held: list[float] = []  # confidence scores: claims with evidence, then without it
        hidden_scores: list[float] = []
        done = 0
        for claim in claims:
            t0 = time.perf_counter()
            answer = rag.ask(claim.text)
            latencies.append((time.perf_counter() - t0) * 1000.0)
            if claim.evidence:
                held.append(answer.confidence.score)
            cited = () if answer.fallback else resolve_citations(answer, index.doc_of, spans)
            answered.append(AnsweredClaim(claim, answer.fallback, cited))
            done += 1
            if progress:
                progress(done, total, name)
        fallbacks = 0
        for q in questions:
            fallbacks += rag.ask(q).fallback
            done += 1
            if progress:
                progress(done, total, name)
        abstained = 0
        for claim in scored_claims:
            gold = set(claim.evidence)

            def drop(h: Hit, gold: set[str] = gold) -> bool:
                return index.doc_of.get(h.chunk.doc_id, "") in gold

            hidden = AnswerHooks(search=without(rag.search, drop, rag.settings.retrieval_top_k))
            blind = rag.ask(claim.text, hooks=hidden)
            abstained += blind.fallback
            hidden_scores.append(blind.confidence.score)
            done += 1
            if progress:
                progress(done, total, f"{name} distractor")
        scored = [a for a in answered if a.claim.evidence]
        auc, at_5 = answerability(held, hidden_scores)
        results.append(
            GeneratorAnswers(
                generator=name,
                scores=score_citations(answered),
                fallback_out_of_scope=fallbacks / len(questions) if questions else 0.0,
                out_of_scope=len(questions),
                fallback_in_scope=(
                    sum(a.fallback for a in scored) / len(scored) if scored else 0.0
                ),
                latency_ms=percentiles(latencies),
                distractor_claims=len(scored_claims),
                abstention_distractor=abstained / len(scored_claims) if scored_claims else 0.0,
                answerability_auc=auc,
                abstention_at_5pct=at_5,
            )
        )
        if rag is not base:
            close = getattr(rag.answerer.generator, "close", None)
            if callable(close):
                close()
    return results
