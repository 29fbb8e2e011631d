"""`Ragline` builds the answer pipeline once; a call changes it only through
`AnswerHooks`, keeping the follow-up rewriter and the rest (a real model, no server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragline import AnswerHooks, Ragline
from ragline.answer.generators.base import Delta, GenerationError, GenerationRequest
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.embed.base import Embedder
from ragline.retrieve.conversation import CarryOverRewriter, ChatRewriter
from ragline.retrieve.multiquery import ChatExpander
from ragline.settings import Settings
from ragline.types import SearchResult

HISTORY = [{"role": "user", "content": "How often does the keeper sound the foghorn?"}]


class StandIn:
    """A generator that is no language model (as serve's "LLM busy" one)."""

    name = "busy"
    model = ""

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        raise GenerationError("busy")


def test_hooks_swap_parts_for_one_call_only(tmp_path: Path, embedder: Embedder) -> None:
    llm = OpenAIGenerator("http://127.0.0.1:9/v1", "m")  # never called here
    settings = Settings(index_dir=tmp_path / "index", multi_query=True)
    rag = Ragline(settings, embedder=embedder, generator=llm)
    try:
        base = rag.answerer
        assert rag.answerer_for() is base and rag.answerer_for(None) is base
        assert isinstance(base.rewriter, ChatRewriter) and isinstance(base.expander, ChatExpander)

        def search(query: str, **options: Any) -> SearchResult:
            return SearchResult(query, "hybrid", [], {})

        wrapped = rag.answerer_for(AnswerHooks(search=search, tenant="other"))
        assert wrapped is not base and wrapped.search is search
        assert wrapped.suggest is not base.suggest
        assert (wrapped.rewriter, wrapped.expander, wrapped.verifier, wrapped.generator) == (
            base.rewriter,
            base.expander,
            base.verifier,
            llm,
        )
        # a stand-in generator gets the rewriter and expander it can drive: no model calls
        busy = rag.answerer_for(AnswerHooks(generator=StandIn()))
        assert isinstance(busy.rewriter, CarryOverRewriter) and busy.expander is None
        assert busy.search == base.search
        # the engine's own pipeline is untouched
        assert rag.answerer is base and base.generator is llm and base.search == rag.search
        assert isinstance(base.rewriter, ChatRewriter)
    finally:
        rag.close()


def test_a_search_hook_gets_the_rewritten_follow_up(tmp_path: Path, embedder: Embedder) -> None:
    rag = Ragline(Settings(index_dir=tmp_path / "index"), embedder=embedder)
    searched: list[str] = []
    retrieved: list[SearchResult] = []

    def search(query: str, **options: Any) -> SearchResult:
        searched.append(query)
        return SearchResult(query, "hybrid", [], {})

    try:
        hooks = AnswerHooks(search, on_retrieval=retrieved.append)
        answer = rag.ask("And when does it stop?", history=HISTORY, hooks=hooks)
    finally:
        rag.close()
    assert answer.fallback and answer.query_rewrite == "carry-over"
    assert searched == [answer.search_query] and "foghorn" in answer.search_query
    assert [r.query for r in retrieved] == searched


def test_ingest_cuts_chunks_to_the_embedders_window(
    tmp_path: Path, make_rag: Any, embedder: Embedder
) -> None:
    """Issue 28: a code block of ~1,000 tokens was one chunk whose tail MiniLM never
    read. Every stored chunk's embedded text now fits the embedder's window."""
    lines = "\n".join(f"result_{i} = transform(batch_{i}, scale={i})" for i in range(90))
    prose = " ".join(f"Sentence {i} explains the training loop." for i in range(60))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "loop.md").write_text(
        f"# Training loops\n\n{prose}\n\n## The code\n\n```python\n{lines}\n```\n",
        encoding="utf-8",
    )
    rag = make_rag()
    rag.ingest(docs)
    chunks = [c for batch, _ in rag.store.iter_chunks() for c in batch]
    assert len(chunks) >= 5
    assert embedder.window_tokens == 254
    for c in chunks:
        assert embedder.count_tokens(c.embed_text) <= embedder.window_tokens, c.text[:60]
    code = [c for c in chunks if c.has_code]
    assert len(code) >= 4 and all(c.text.startswith("```python\n") for c in code)
    # the last line of code is embedded, so vector search alone finds its chunk
    hits = rag.search("result_89 = transform(batch_89, scale=89)", mode="vector").hits
    assert "result_89 = transform" in hits[0].chunk.text
