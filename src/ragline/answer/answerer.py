"""The answer pipeline: validate → small talk? → retrieve → confidence → context →
generate → cite and verify, as a stream of events.

The order is the safety: the generator runs only when retrieval found something
relevant enough (the confidence gate), sees only the numbered context, and its
citations are mapped and verified before the final answer is built. Each stage
is timed into ``Answer.timings_ms``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from ragline.answer import i18n
from ragline.answer.citations import CitationTracker, EmbedTexts, SupportVerifier
from ragline.answer.confidence import (
    LOW,
    assess,
    fill_relevance,
    smalltalk_confidence,
    with_evidence,
    with_reader,
)
from ragline.answer.context import CountTokens, build_context
from ragline.answer.evidence import evidence_weights
from ragline.answer.generators import extractive_generator
from ragline.answer.generators.base import (
    ROLES,
    GenerationDeadline,
    GenerationError,
    GenerationRequest,
    Generator,
    Message,
)
from ragline.answer.generators.prompt import GENERATOR_DECLINED
from ragline.answer.judging import ContextEvidence, ReaderJudge, judge_context
from ragline.answer.reading import ReaderBars
from ragline.retrieve.conversation import QueryRewriter, Rewrite
from ragline.retrieve.multiquery import Expansion, QueryExpander, fuse_results
from ragline.settings import AnswerSettings, Settings
from ragline.types import (
    Answer,
    Citation,
    Confidence,
    Filters,
    SearchResult,
    Source,
    StreamEvent,
)

if TYPE_CHECKING:
    from ragline.retrieve.retriever import SearchMode

#: Queries longer than this are cut before retrieval (selected text can be long).
MAX_QUERY_CHARS = 2000

HistoryInput = Iterable[Message | Mapping[str, Any]]


class SearchOptions(TypedDict, total=False):
    """How to retrieve: the keyword arguments of ``Retriever.search`` (see there),
    passed through unchanged by ``Ragline.search``/``ask``/``ask_stream`` and the
    answerer, so a new option is added here and in ``Retriever.search`` only."""

    mode: SearchMode | None
    top_k: int | None
    filters: Filters | None
    expand: int | None


class SearchFn(Protocol):
    """``Ragline.search`` (or ``Retriever.search``)."""

    def __call__(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult: ...


class Parts(TypedDict, total=False):
    """The parts of an :class:`Answerer` one call may swap (see :meth:`Answerer.using`)."""

    search: SearchFn
    generator: Generator
    suggest: Callable[[], list[str]] | None
    rewriter: QueryRewriter | None
    expander: QueryExpander | None
    on_retrieval: Callable[[SearchResult], None] | None


def _lap(timings: dict[str, float], stage: str, since: float) -> float:
    """Record the milliseconds ``stage`` took since ``since``; the time now, for the next."""
    now = time.perf_counter()
    timings[stage] = (now - since) * 1000.0
    return now


def validate_question(question: object, max_chars: int) -> str:
    """The question with whitespace collapsed; a clear error for anything unusable."""
    if not isinstance(question, str):
        raise ValueError(f"question must be a string, got {type(question).__name__}")
    q = " ".join(question.split())
    if not q:
        raise ValueError("question is empty")
    if len(q) > max_chars:
        raise ValueError(f"question is {len(q)} characters long; the limit is {max_chars}")
    return q


def validate_history(history: HistoryInput | None, keep: int) -> tuple[Message, ...]:
    """The last ``keep`` messages, each checked (``history[i].role`` / ``.content``)."""
    if history is None:
        return ()
    out: list[Message] = []
    for i, item in enumerate(history):
        role: object
        content: object
        if isinstance(item, Message):
            role, content = item.role, item.content
        elif isinstance(item, Mapping):
            role, content = item.get("role"), item.get("content")
        else:
            raise ValueError(f"history[{i}] must be a message with role and content")
        if role not in ROLES:
            raise ValueError(f"history[{i}].role must be 'user' or 'assistant', got {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"history[{i}].content must be a string")
        out.append(Message(str(role), content))
    return tuple(out[-keep:]) if keep > 0 else ()


def validate_selected_text(text: object, max_chars: int) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"selected_text must be a string, got {type(text).__name__}")
    t = " ".join(text.split())
    if len(t) > max_chars:
        raise ValueError(f"selected_text is {len(t)} characters long; the limit is {max_chars}")
    return t


def unsupported_sentences(text: str, citations: list[Citation]) -> list[str]:
    """Claims (answer sentences) that carry citations, none of them supported."""
    by_claim: dict[str, bool] = {}
    for c in citations:
        by_claim[c.claim] = by_claim.get(c.claim, False) or c.supported
    return [claim for claim, ok in by_claim.items() if not ok and claim and claim in text]


#: The reader's bars (question, claim) per judge, from benchmarks/calibrate_reader.py:
#: each the highest that keeps ≤ 5 % of the fit rows the documents answer from falling
#: back (d2l train questions, SciFact even-id claims), with that judge.
READER_BARS = {"both": (0.040, 0.004), "reader": (0.095, 0.108)}


def reader_judge(settings: AnswerSettings) -> ReaderJudge | None:
    """The reader as the settings configure it (``judge`` both or reader), else None."""
    if settings.judge == "evidence" or not settings.evidence_check:
        return None
    from ragline.reader import shared_reader

    question, claim = READER_BARS[settings.judge]
    bars = ReaderBars(
        answer=question if settings.reader_threshold is None else settings.reader_threshold,
        claim=claim if settings.reader_claim_threshold is None else settings.reader_claim_threshold,
        high=settings.reader_high,
        scale=settings.reader_scale,
        shift=settings.reader_shift,
    )
    return ReaderJudge(
        shared_reader(settings.reader_threads),
        bars,
        settings.reader_max_passages,
        with_evidence=settings.judge == "both",
    )


def reader_support(judge: ReaderJudge) -> Callable[[str, str], float | None]:
    """(claim, passage) → the reader's calibrated probability; None for a claim not in
    English (the reader was trained on English; the support score decides those)."""
    from ragline.text.language import query_language

    def support(claim: str, passage: str) -> float | None:
        if query_language(claim) != "en":
            return None
        return judge.bars.probability(judge.reader.read(claim, [passage])[0].logit)

    return support


class Answerer:
    """Answers questions from one search function with one generator.

    ``suggest`` lists what the corpus covers (for the fallback); it is called only
    when the fallback is returned. ``on_retrieval`` is given the result the answer is
    built from (the phrasings' searches fused), for a caller that maps citations.
    """

    def __init__(
        self,
        settings: Settings,
        search: SearchFn,
        generator: Generator,
        embed: EmbedTexts,
        count_tokens: CountTokens,
        suggest: Callable[[], list[str]] | None = None,
        rewriter: QueryRewriter | None = None,
        expander: QueryExpander | None = None,
        on_retrieval: Callable[[SearchResult], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_retrieval = on_retrieval
        self.rewriter = rewriter
        self.expander = expander
        self.search = search
        self.generator = generator
        self.count_tokens = count_tokens
        self.suggest = suggest
        self.verifier = SupportVerifier(
            embed,
            settings.citation_support_threshold,
            settings.citation_lexical_weight,
            settings.citation_key_coverage,
        )
        self.evidence_weights = evidence_weights(settings)
        self.embed = embed
        self.reader = reader_judge(settings)
        #: An LLM's citations are checked by the reader (claim and cited passage read
        #: together); an extractive answer's sentences are copied from their block.
        self.llm_verifier = self.verifier
        if self.reader is not None:
            self.llm_verifier = SupportVerifier(
                embed,
                settings.citation_support_threshold,
                settings.citation_lexical_weight,
                settings.citation_key_coverage,
                reader=reader_support(self.reader),
                reader_bar=settings.reader_citation_threshold,
            )

    def using(self, **parts: Unpack[Parts]) -> Answerer:
        """This pipeline with ``parts`` swapped for one call: a shallow copy, so every
        caller shares the parts built once (verifier, rewriter...) and concurrent calls
        never see each other's swaps."""
        clone = copy.copy(self)
        vars(clone).update(parts)
        return clone

    def answer(
        self,
        question: str,
        *,
        history: HistoryInput | None = None,
        selected_text: str | None = None,
        **search: Unpack[SearchOptions],
    ) -> Answer:
        """The final answer (the ``done`` event of :meth:`stream`)."""
        final: Answer | None = None
        for event in self.stream(question, history=history, selected_text=selected_text, **search):
            if event.type == "done":
                final = event.answer
        assert final is not None  # stream always ends with done
        return final

    def stream(
        self,
        question: str,
        *,
        history: HistoryInput | None = None,
        selected_text: str | None = None,
        **search: Unpack[SearchOptions],
    ) -> Iterator[StreamEvent]:
        """``token`` and ``citation`` events as the answer is written, an ``error``
        event if generation fails midway, and always a final ``done``. ``search``
        goes to the search function as it is.

        Bad input raises ``ValueError`` at the call, before any event.
        """
        s = self.settings
        q = validate_question(question, s.max_question_chars)
        turns = validate_history(history, s.history_messages)
        selected = validate_selected_text(selected_text, s.max_selected_text_chars)
        rewrite = self.rewriter.rewrite(q, turns) if self.rewriter and turns else Rewrite(q, "none")
        expansion = Expansion((rewrite.query,), "none")
        if self.expander is not None and (selected or i18n.smalltalk_reply(q) is None):
            expansion = self.expander.expand(rewrite.query)
        events = self._events(q, turns, selected, search, expansion.queries)
        return self._with_rewrite(events, rewrite, expansion)

    @staticmethod
    def _with_rewrite(
        events: Iterator[StreamEvent], rewrite: Rewrite, expansion: Expansion
    ) -> Iterator[StreamEvent]:
        """The final answer records the queries that were searched (a rewritten
        follow-up, the LLM's phrasings)."""
        for event in events:
            if event.answer is not None:
                event.answer.search_query = rewrite.query
                event.answer.query_rewrite = rewrite.method
                event.answer.search_phrasings = list(expansion.phrasings)
                event.answer.query_expansion = expansion.method
                event.answer.query_expansion_error = expansion.error
            yield event

    def _search_all(self, queries: list[str], search: SearchOptions) -> SearchResult:
        """One search, or (multi-query) one per phrasing fused by RRF (the question's
        own search first)."""
        if len(queries) == 1:
            return self.search(queries[0], **search)
        results = [self.search(x, **search) for x in queries]
        top_k = search.get("top_k") or self.settings.retrieval_top_k
        return fuse_results(results, top_k, self.settings.rrf_k)

    def _events(
        self,
        q: str,
        turns: tuple[Message, ...],
        selected: str,
        search: SearchOptions,
        searched: tuple[str, ...],
    ) -> Iterator[StreamEvent]:
        s = self.settings
        t0 = time.perf_counter()
        timings: dict[str, float] = {}

        reply = i18n.smalltalk_reply(q) if not selected else None
        if reply is not None:
            yield StreamEvent("token", text=reply)
            _lap(timings, "total", t0)
            chat = i18n.translate_reason(smalltalk_confidence(), i18n.answer_language(q))
            answer = self._plain(q, reply, chat, timings, smalltalk=True)
            yield StreamEvent("done", answer=answer)
            return

        queries = [f"{x}\n{selected}"[:MAX_QUERY_CHARS] if selected else x for x in searched]
        query = queries[0]
        result = self._search_all(queries, search)
        if self.on_retrieval is not None:
            self.on_retrieval(result)
        t = _lap(timings, "retrieve", t0)
        for stage, ms in result.timings_ms.items():
            timings[f"retrieve.{stage}"] = ms
        result.hits = fill_relevance(query, result.hits, self.verifier.embed)
        confidence = assess(result.hits, s.confidence_min, s.confidence_high)
        lang = i18n.answer_language(q)
        confidence = i18n.translate_reason(confidence, lang)
        t = _lap(timings, "confidence", t)
        # With the reader judging, a low top cosine does not refuse: the reader reads
        # the passages (an exact-term hit can have a low cosine and still answer).
        reads = self.reader is not None and s.evidence_check and not selected and lang == "en"
        off_topic = confidence.level == "low"
        if off_topic and not (reads and result.hits):
            yield from self._out_of_scope(q, confidence, timings, t0, lang, result.mode)
            return

        context = build_context(result.hits, self.count_tokens, s.max_context_tokens)
        t = _lap(timings, "context", t)
        # The evidence check: a question about the selected text takes its words from
        # the selection, so its own words are not the constraints to check.
        ev: ContextEvidence | None = None
        if s.evidence_check and not selected:
            ev = judge_context(q, context, self.verifier.embed, self.evidence_weights, self.reader)
            t = _lap(timings, "evidence", t)
            best = ev.best_candidate()
            block = context.block(best.block) if best is not None else None
            label = f"[{block.number}] {block.label}" if block is not None else ""
            if ev.method == "reader":
                lead = ev.best_candidate()
                top = next(
                    (v.probability for v in ev.verdicts if lead and v.number == lead.block),
                    ev.verdicts[0].probability if ev.verdicts else 0.0,
                )
                confidence = with_reader(
                    confidence, top, ev.answers, ev.reason(context), s.reader_high, label
                )
            else:
                confidence = with_evidence(
                    confidence, ev.best, ev.answers, ev.reason(context), label
                )
            confidence = i18n.translate_reason(confidence, lang)
            if off_topic and not (ev.answers and ev.method == "reader"):
                # Only the reader's own verdict lifts the cosine gate: a sheet's rows or
                # another language are judged by the evidence check, whose word rules
                # matched a table row of the docs to "the boiling point of tungsten".
                yield from self._out_of_scope(q, confidence, timings, t0, lang, result.mode)
                return
            if not ev.answers:
                labels = [b.label for b in context.blocks]
                text = i18n.related_text(confidence.reason, labels, lang)
                yield StreamEvent("token", text=text)
                _lap(timings, "total", t0)
                answer = self._plain(
                    q,
                    text,
                    confidence,
                    timings,
                    fallback=True,
                    mode=result.mode,
                    related=[b.source() for b in context.blocks],
                )
                yield StreamEvent("done", answer=answer)
                return
        yield from self._generate(
            GenerationRequest(q, context, turns, selected, ev), confidence, result, timings, t0, t
        )

    def _out_of_scope(
        self,
        q: str,
        confidence: Confidence,
        timings: dict[str, float],
        t0: float,
        lang: str,
        mode: str,
    ) -> Iterator[StreamEvent]:
        """The fallback for a question nothing retrieved is about: what the corpus covers."""
        suggestions = self.suggest() if self.suggest else []
        text = i18n.fallback_text(suggestions, lang)
        yield StreamEvent("token", text=text)
        _lap(timings, "total", t0)
        answer = self._plain(
            q, text, confidence, timings, fallback=True, suggestions=suggestions, mode=mode
        )
        yield StreamEvent("done", answer=answer)

    def _generate(
        self,
        request: GenerationRequest,
        confidence: Confidence,
        result: SearchResult,
        timings: dict[str, float],
        t0: float,
        t: float,
    ) -> Iterator[StreamEvent]:
        s = self.settings
        q, context = request.question, request.context
        verifier = self.verifier if self.generator.name == "extractive" else self.llm_verifier
        tracker = CitationTracker(
            context, verifier, remove_unsupported=s.unsupported_citations == "remove"
        )
        usage: dict[str, int] = {"context_tokens": context.token_count}
        error: str | None = None
        verify_ms = 0.0
        generator: Generator = self.generator
        wrote = False
        try:
            for delta in generator.generate(request):
                usage.update(delta.usage)
                if not delta.text:
                    continue
                if not wrote:  # seed 002's "LLM first token" latency
                    timings["first_token"] = (time.perf_counter() - t0) * 1000.0
                wrote = True
                yield StreamEvent("token", text=delta.text)
                v0 = time.perf_counter()
                found = tracker.feed(delta.text)
                verify_ms += (time.perf_counter() - v0) * 1000.0
                for citation in found:
                    yield StreamEvent("citation", citation=citation)
        except GenerationError as e:
            error = str(e)
            # Past the deadline the partial answer gives way too: the ``done`` event's
            # answer (the extractive one) replaces the text streamed so far.
            restart = wrote and isinstance(e, GenerationDeadline)
            if (wrote and not restart) or generator.name == "extractive":
                yield StreamEvent("error", error=error)
            else:  # nothing written yet: the extractive answer, with a notice saying why
                if restart:
                    tracker = CitationTracker(
                        context, self.verifier, remove_unsupported=tracker.remove_unsupported
                    )
                    yield StreamEvent("token", text="\n\n")
                generator = extractive_generator(self.settings, self.embed)
                notice = i18n.llm_busy_notice(error, i18n.answer_language(q))
                yield StreamEvent("token", text=notice)
                tracker.feed(notice)
                for delta in generator.generate(request):
                    usage.update(delta.usage)
                    if delta.text:
                        yield StreamEvent("token", text=delta.text)
                        for citation in tracker.feed(delta.text):
                            yield StreamEvent("citation", citation=citation)
        timings["generate"] = (time.perf_counter() - t) * 1000.0 - verify_ms
        v0 = time.perf_counter()
        resolved = tracker.finish()
        timings["verify"] = verify_ms + (time.perf_counter() - v0) * 1000.0
        # Citation offsets index the text as generated; trimming its leading blank
        # space (a model may open with "\n") shifts them by as much.
        lead = len(resolved.text) - len(resolved.text.lstrip())
        text = resolved.text.strip()
        citations = [replace(c, start=c.start - lead, end=c.end - lead) for c in resolved.citations]
        fallback = False
        lang = i18n.answer_language(q)
        if not text and error is None:  # nothing in the context was answer-worthy
            text, fallback = i18n.fallback_answer(lang), True
            yield StreamEvent("token", text=text)
        elif i18n.is_fallback(text):
            # The generator says the context does not answer: the answer is the
            # fallback, with the passages as related and the confidence saying so.
            fallback = True
            reason = i18n.reason_text(GENERATOR_DECLINED, lang)
            confidence = Confidence(confidence.score, LOW, reason)
            text = i18n.related_text(reason, [b.label for b in context.blocks], lang)
            citations = []
        _lap(timings, "total", t0)
        answer = Answer(
            question=q,
            text=text,
            citations=citations,
            sources=[b.source() for b in context.blocks],
            confidence=confidence,
            generator=generator.name,
            model=generator.model,
            fallback=fallback,
            # the extractive stand-in is a whole answer; a cut stream is not
            complete=error is None or generator is not self.generator,
            error=error,
            dropped_citations=resolved.dropped,
            usage=usage,
            timings_ms=timings,
            retrieval_mode=result.mode,
            unsupported_sentences=unsupported_sentences(text, citations),
        )
        yield StreamEvent("done", answer=answer)

    def _plain(
        self,
        q: str,
        text: str,
        confidence: Confidence,
        timings: dict[str, float],
        *,
        smalltalk: bool = False,
        fallback: bool = False,
        suggestions: list[str] | None = None,
        mode: str = "",
        related: list[Source] | None = None,
    ) -> Answer:
        """An answer written without the generator (small talk, fallback). ``related``:
        passages found that do not answer (listed as sources, never cited)."""
        return Answer(
            question=q,
            text=text,
            citations=[],
            sources=list(related or []),
            confidence=confidence,
            generator="none",
            model="",
            fallback=fallback,
            smalltalk=smalltalk,
            suggestions=list(suggestions or []),
            timings_ms=timings,
            retrieval_mode=mode,
        )
