"""`Ragline`: the public entry point wiring settings to the pipeline's parts.

Parts are created lazily and once (the model load is the expensive step), and
each can be passed in, so tests and applications can swap a store or embedder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ragline.embed.base import Embedder
from ragline.embed.choice import AUTO, ENGLISH, backend_of, choose_backend, installed_choice
from ragline.embed.factory import make_embedder
from ragline.embed.tokenizer import TokenCounter
from ragline.retrieve.rerank import Reranker, make_reranker
from ragline.retrieve.retriever import Retriever
from ragline.settings import ChunkerName, Settings
from ragline.store.base import IndexStore, check_model, chunk_problem
from ragline.store.factory import make_store
from ragline.types import Answer, Scalar, SearchResult, StreamEvent

# The answer pipeline and the ingest pipeline are imported by the calls that use them:
# a search (a cold `ragline search`, issue 26) loads neither the generators nor the
# parsers.
if TYPE_CHECKING:
    from ragline.answer.answerer import Answerer, HistoryInput, SearchFn, SearchOptions
    from ragline.answer.generators import Generator
    from ragline.ingest.chunk import Chunker
    from ragline.ingest.progress import ProgressCallback
    from ragline.ingest.report import IngestReport

#: Column types for filters typed on a command line (everything else is a string).
BOOL_FIELDS = frozenset({"has_code", "has_equations"})
INT_FIELDS = frozenset(
    {"chunk_index", "page", "token_count", "word_count", "start_char", "end_char"}
)


def parse_filter(expr: str) -> tuple[str, Scalar]:
    """``key=value`` from the command line, typed by the column it names."""
    key, sep, raw = expr.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"filter {expr!r}: expected key=value")
    value: Scalar = raw.strip()
    if key in BOOL_FIELDS:
        low = raw.strip().lower()
        if low not in {"true", "false", "1", "0", "yes", "no"}:
            raise ValueError(f"filter {key}: expected true or false, got {raw!r}")
        value = low in {"true", "1", "yes"}
    elif key in INT_FIELDS:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"filter {key}: expected an integer, got {raw!r}") from None
    return key, value


def chunk_window(settings: Settings, embedder: Embedder) -> int | None:
    """What no section chunk's embedded text may pass: the embedder's window, with
    ``chunk_fit_model`` (None without: the user accepts a truncated tail). An
    embedder written before ``window_tokens`` existed reads ``embed_max_tokens``
    less [CLS] and [SEP]."""
    if not settings.chunk_fit_model:
        return None
    window = getattr(embedder, "window_tokens", None)
    return int(window) if window is not None else settings.embed_max_tokens - 2


def make_chunker(
    settings: Settings,
    count_tokens: TokenCounter,
    name: ChunkerName | None = None,
    *,
    window: int | None = None,
) -> Chunker:
    """The configured chunker, capped at ``chunk_max_chars`` characters a chunk;
    section chunks also at ``window`` tokens (:func:`chunk_window`)."""
    from ragline.ingest.chunk import CappedChunker, RecursiveChunker, SectionChunker

    inner: Chunker
    if (name or settings.chunker) == "recursive":
        inner = RecursiveChunker(
            count_tokens,
            chunk_chars=settings.recursive_chunk_chars,
            overlap_chars=settings.recursive_overlap_chars,
        )
    else:
        inner = SectionChunker(
            count_tokens,
            max_tokens=settings.effective_chunk_max_tokens,
            overlap_tokens=settings.chunk_overlap_tokens,
            min_tokens=settings.chunk_min_tokens,
            window=window,
        )
    return CappedChunker(inner, count_tokens, settings.chunk_max_chars)


@dataclass(frozen=True, slots=True)
class AnswerHooks:
    """What one call changes in the answer pipeline, so that every caller (CLI, HTTP
    API, MCP, evaluation) runs the one :class:`Ragline` builds, with its follow-up
    rewriter, multi-query expander and verifier.

    ``search`` replaces :meth:`Ragline.search` (a server's retrying search with its
    cached fallback, an evaluation's that hides the evidence). ``generator`` stands in
    for the configured one (a server's "LLM busy" stand-in); the rewriter and expander
    are then the ones it can drive, so a stand-in never calls the busy model.
    ``tenant`` scopes the fallback's topic suggestions (default: the settings').
    ``on_retrieval`` is given the result the answer is built from (with multi-query,
    the phrasings' searches fused), e.g. to map streamed citations to sources."""

    search: SearchFn | None = None
    generator: Generator | None = None
    tenant: str | None = None
    on_retrieval: Callable[[SearchResult], None] | None = None


class Ragline:
    """Ingest a folder, search it; one object per index folder.

    >>> rag = Ragline(Settings(index_dir=Path("/tmp/idx")))   # doctest: +SKIP
    >>> rag.ingest(Path("docs"))                                # doctest: +SKIP
    >>> rag.search("how do I filter by chapter?").hits[0].chunk.section  # doctest: +SKIP
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        store: IndexStore | None = None,
        reranker: Reranker | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self._embedder = embedder
        #: an embedder handed in is the application's choice: ``auto`` never replaces it
        self._embedder_pinned = embedder is not None
        self._store = store
        self._reranker = reranker
        self._retriever: Retriever | None = None
        self._generator = generator
        self._answerer: Answerer | None = None

    @property
    def embedder(self) -> Embedder:
        """The configured embedder; with ``RAGLINE_EMBEDDER=auto`` the model the index
        records (an empty index: the English default until an ingest chooses)."""
        if self._embedder is None:
            if self.settings.embedder == AUTO:
                stored = self.store.fingerprint()
                backend = backend_of(stored) if stored else None
                if backend:  # another model stays auto's default: check_model names both
                    self.settings = self.settings.with_embedder(backend)
            self._embedder = make_embedder(self.settings)
        return self._embedder

    @property
    def store(self) -> IndexStore:
        if self._store is None:
            if self._embedder is None and self.settings.embedder == AUTO:
                from ragline.embed.onnx import DEFAULT_DIMENSION

                # the model is read from the index, so it is opened first: an empty
                # one takes the chosen model's dimension when it records it
                self._store = make_store(self.settings, DEFAULT_DIMENSION)
            else:
                self._store = make_store(self.settings, self.embedder.dimension)
        return self._store

    def _choose_embedder(self, languages: Mapping[str, int]) -> tuple[Embedder, str]:
        """``auto`` on a new index: the model its sampled chunk languages call for.
        From then on this object (its settings, confidence scale included) serves
        that model, as a later one will from the index's fingerprint."""
        choice = choose_backend(languages, self.settings.embed_auto_non_english)
        if not languages:  # nothing to decide on: decided again by the next ingest
            return self.embedder, choice.reason + " (no chunks sampled: decided next time)"
        choice = installed_choice(choice)  # the English model when e5 is missing
        self.settings = self.settings.with_embedder(choice.backend)
        if choice.backend != ENGLISH or self._embedder is None:
            self._embedder = make_embedder(self.settings)
        self._retriever = None
        self._answerer = None
        return self._embedder, choice.reason

    @property
    def reports_dir(self) -> Path:
        return self.settings.index_dir / "reports"

    def ingest(
        self,
        path: str | Path,
        *,
        tenant: str | None = None,
        chunker: ChunkerName | None = None,
        progress: ProgressCallback | None = None,
        title: str | None = None,
        max_pages: int | None = None,
        max_depth: int | None = None,
        stop: threading.Event | None = None,
    ) -> IngestReport:
        """Sync ``path`` (a folder, a file, or an http(s) URL) into the index; the
        report is also saved as JSON.

        ``title``: the title of a single file that has none of its own. A URL is
        crawled (:mod:`ragline.ingest.web`) within ``max_pages`` fetches and
        ``max_depth`` links (default: the ``web_*`` settings). One ingest runs at a
        time per index folder: another one's raises
        :class:`~ragline.ingest.lock.IngestLockedError` at once, naming its pid.
        ``stop`` (set by a Ctrl-C) ends the run early, keeping the files whose
        chunks are embedded (see :class:`~ragline.ingest.sync.Indexer`)."""
        from ragline.ingest.lock import ingest_lock

        with ingest_lock(self.settings.index_dir):
            return self._ingest(path, tenant, chunker, progress, title, max_pages, max_depth, stop)

    def _ingest(
        self,
        path: str | Path,
        tenant: str | None,
        chunker: ChunkerName | None,
        progress: ProgressCallback | None,
        title: str | None,
        max_pages: int | None,
        max_depth: int | None,
        stop: threading.Event | None = None,
    ) -> IngestReport:
        from ragline.ingest.sync import Indexer
        from ragline.ingest.web import PageCache, ingest_web, is_url

        counter = TokenCounter()
        embedder = self.embedder  # resolves auto from the index's model, if it has one
        settings = self.settings
        if chunker and chunker != settings.chunker:
            settings = settings.model_copy(update={"chunker": chunker})
        auto = settings.embedder == AUTO and not self._embedder_pinned
        choose = self._choose_embedder if auto else None
        chunker_ = make_chunker(settings, counter, window=chunk_window(settings, embedder))
        indexer = Indexer(self.store, embedder, settings, chunker_, choose=choose, stop=stop)
        if isinstance(path, str) and is_url(path):
            cache = PageCache(settings.index_dir)
            try:
                report = ingest_web(
                    indexer,
                    cache,
                    path,
                    tenant=tenant or settings.tenant,
                    max_pages=settings.web_max_pages if max_pages is None else max_pages,
                    max_depth=settings.web_max_depth if max_depth is None else max_depth,
                    progress=progress,
                )
            finally:
                cache.close()
        else:
            report = indexer.sync(Path(path), tenant=tenant, progress=progress, title=title)
        report.save(self.reports_dir)
        return report

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        """Ranked chunks for ``query``; ``options`` (mode, top_k, filters, expand) are
        :meth:`Retriever.search <ragline.retrieve.retriever.Retriever.search>`'s."""
        if self._retriever is None:
            check_model(self.store, self.embedder.fingerprint)
            reranker = self._reranker or make_reranker(self.settings)
            self._retriever = Retriever(self.store, self.embedder, self.settings, reranker)
        return self._retriever.search(query, **options)

    @property
    def answerer(self) -> Answerer:
        """The answer pipeline over this index (built once; the generator from settings
        unless one was passed in). The only place an :class:`Answerer` is built: a call
        that differs passes :class:`AnswerHooks` to :meth:`ask`/:meth:`ask_stream`."""
        if self._answerer is None:
            from ragline.answer.answerer import Answerer
            from ragline.answer.embedding_cache import EmbeddingCache
            from ragline.answer.generators import make_generator
            from ragline.answer.rewriters import make_expander, make_rewriter

            cache = EmbeddingCache(self.embedder)
            generator = self._generator or make_generator(self.settings, cache.vectors)
            self._answerer = Answerer(
                self.settings,
                self.search,
                generator,
                cache.vectors,
                TokenCounter(),
                suggest=self._topics(self.settings.tenant),
                rewriter=make_rewriter(self.settings, generator),
                expander=make_expander(self.settings, generator),
            )
        return self._answerer

    def _topics(self, tenant: str) -> Callable[[], list[str]]:
        """What ``tenant``'s documents cover, for the fallback (read when it is given)."""
        from ragline.answer.suggestions import corpus_topics

        return lambda: corpus_topics(self.store.documents(tenant))

    def answerer_for(self, hooks: AnswerHooks | None = None) -> Answerer:
        """:attr:`answerer`, or for one call the same pipeline with ``hooks`` applied."""
        base = self.answerer
        if hooks is None:
            return base
        from ragline.answer.answerer import Parts
        from ragline.answer.rewriters import make_expander, make_rewriter

        parts: Parts = {}
        if hooks.search is not None:
            parts["search"] = hooks.search
        if hooks.generator is not None:
            parts["generator"] = hooks.generator
            parts["rewriter"] = make_rewriter(self.settings, hooks.generator)
            parts["expander"] = make_expander(self.settings, hooks.generator)
        if hooks.tenant is not None:
            parts["suggest"] = self._topics(hooks.tenant)
        if hooks.on_retrieval is not None:
            parts["on_retrieval"] = hooks.on_retrieval
        return base.using(**parts)

    def ask(
        self,
        question: str,
        *,
        history: HistoryInput | None = None,
        selected_text: str | None = None,
        hooks: AnswerHooks | None = None,
        **search: Unpack[SearchOptions],
    ) -> Answer:
        """A cited answer (or the fallback) for ``question``; see :meth:`ask_stream`."""
        return self.answerer_for(hooks).answer(
            question, history=history, selected_text=selected_text, **search
        )

    def ask_stream(
        self,
        question: str,
        *,
        history: HistoryInput | None = None,
        selected_text: str | None = None,
        hooks: AnswerHooks | None = None,
        **search: Unpack[SearchOptions],
    ) -> Iterator[StreamEvent]:
        """``token``/``citation`` events as the answer is written, then ``done`` with the
        :class:`~ragline.types.Answer` (``error`` first if generation failed midway).
        ``search`` holds :meth:`search`'s options, for the retrieval step; ``hooks``
        what this call changes (see :class:`AnswerHooks`)."""
        return self.answerer_for(hooks).stream(
            question, history=history, selected_text=selected_text, **search
        )

    def reindex(self, batch_size: int = 512) -> int:
        """Re-embed every stored chunk with the configured model, without re-parsing
        the files; the old index serves until the new one is complete."""
        store, embedder = self.store, self.embedder

        def batches() -> Any:
            for chunks, _old in store.iter_chunks(batch_size):
                yield chunks, embedder.embed_documents([c.embed_text for c in chunks])

        n = store.rebuild(embedder.fingerprint, batches())
        self._retriever = None
        return n

    def status(self) -> dict[str, Any]:
        store = self.store
        fp = store.fingerprint()
        docs = store.documents(None)
        tenants: dict[str, int] = {}
        for d in docs:
            tenants[d.tenant] = tenants.get(d.tenant, 0) + 1
        return {
            "index_dir": str(self.settings.index_dir),
            "model": fp.to_dict() if fp else None,
            "configured_model": self.embedder.fingerprint.to_dict(),
            "documents": len(docs),
            "chunks": store.info(None).chunks,
            "tenants": tenants,
            "malformed_chunks": malformed_chunks(store),
        }

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if self._answerer is not None:  # an HTTP generator holds a connection pool
            close_generator = getattr(self._answerer.generator, "close", None)
            if callable(close_generator):
                close_generator()


#: Malformed chunks ``status`` names by id (the count covers all of them).
MALFORMED_SHOWN = 20


def malformed_chunks(store: IndexStore) -> dict[str, Any]:
    """Stored chunks with a missing or wrong-typed field (left out of answers): a
    full read of the chunks, so a crash's or a hand edit's damage is seen before a
    question finds it."""
    found: dict[str, str] = {}
    count = 0
    for chunks, _ in store.iter_chunks():
        for chunk in chunks:
            problem = chunk_problem(chunk)
            if problem is not None:
                count += 1
                if len(found) < MALFORMED_SHOWN:
                    found[str(chunk.id)] = problem
    return {"count": count, "ids": found}
