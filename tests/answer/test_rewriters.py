"""The follow-up rewriter and multi-query expander the settings pick, and both LLM
calls over real HTTP (multi-query end to end on a real index)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline import Ragline
from ragline.answer.generators.base import Message
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.answer.rewriters import make_expander, make_rewriter
from ragline.retrieve.conversation import CarryOverRewriter, ChatRewriter
from ragline.retrieve.multiquery import ChatExpander
from ragline.settings import Settings
from ragline.types import Source

HISTORY = [Message("user", "How do I lazy-load a component with lazy?")]


class _Extractive:
    name = "extractive"
    model = ""


def test_settings_pick_the_rewriter() -> None:
    assert make_rewriter(Settings(query_rewrite="off"), _Extractive()) is None  # type: ignore[arg-type]
    carry = make_rewriter(Settings(), _Extractive())  # type: ignore[arg-type]
    assert isinstance(carry, CarryOverRewriter)


def test_llm_rewrite_through_an_openai_endpoint(llm_server: tuple[str, object]) -> None:
    url, llm = llm_server
    gen = OpenAIGenerator(url, "m")
    rewriter = make_rewriter(Settings(), gen)
    assert isinstance(rewriter, ChatRewriter)
    llm.script.append(("stream", ["How does lazy ", "reset state?"], "done"))  # type: ignore[attr-defined]
    r = rewriter.rewrite("Why does its state get reset?", HISTORY)
    assert (r.method, r.query) == ("llm", "How does lazy reset state?")
    sent = llm.requests[0]["body"]  # type: ignore[attr-defined]
    assert sent["stream"] is False and "lazy-load" in sent["messages"][1]["content"]
    # the endpoint failing: the follow-up still gets the earlier turn's terms
    llm.script.append(("status", 400, {}, "bad request"))  # type: ignore[attr-defined]
    r = rewriter.rewrite("Why does its state get reset?", HISTORY)
    assert r.method == "carry-over" and "lazy" in r.query
    # a carry-over setting never calls the model
    carry = make_rewriter(Settings(query_rewrite="carry-over"), gen)
    assert isinstance(carry, CarryOverRewriter)
    gen.close()


def test_settings_pick_the_expander(llm_server: tuple[str, object]) -> None:
    url, _ = llm_server
    gen = OpenAIGenerator(url, "m")
    assert make_expander(Settings(), gen) is None  # off by default
    assert make_expander(Settings(multi_query=True), _Extractive()) is None  # type: ignore[arg-type]
    expander = make_expander(Settings(multi_query=True, multi_query_count=4), gen)
    assert isinstance(expander, ChatExpander) and expander.n == 4
    gen.close()


KETTLE = "# Kettle\n\nThe kettle boils water for tea in about three minutes.\n"
LIMESCALE = (
    "# Limescale\n\nVinegar dissolves limescale deposits inside appliances. "
    "Rinse twice with fresh water afterwards.\n"
)
QUESTION = "How do I clean the kettle?"


@pytest.fixture
def kettle_docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kettle.md").write_text(KETTLE)
    (docs / "limescale.md").write_text(LIMESCALE)
    return docs


def _file(source: Source) -> str:
    return source.hit.chunk.source.rsplit("/", 1)[-1]


def _rag(make_rag: Callable[..., Ragline], url: str, docs: Path, **extra: object) -> Ragline:
    rag = make_rag(
        generator="openai",
        llm_base_url=url,
        llm_model="m",
        llm_max_retries=0,
        multi_query=True,
        evidence_check=False,
        **extra,
    )
    rag.ingest(docs)
    return rag


def test_multi_query_fuses_a_passage_only_a_phrasing_finds(
    llm_server: tuple[str, Any], make_rag: Callable[..., Ragline], kettle_docs: Path
) -> None:
    url, llm = llm_server
    rag = _rag(make_rag, url, kettle_docs)
    # the question's own keyword search finds the kettle page only
    alone = rag.search(QUESTION, mode="bm25")
    assert {h.chunk.source.rsplit("/", 1)[-1] for h in alone.hits} == {"kettle.md"}
    llm.script.append(
        ("stream", ["1. Remove limescale deposits\n", "2. vinegar descaling"], "done")
    )
    llm.script.append(("stream", ["Vinegar dissolves limescale [1]."], "done"))
    answer = rag.ask(QUESTION, mode="bm25")
    sent = llm.requests[0]["body"]
    assert sent["stream"] is False and sent["messages"][1]["content"] == QUESTION
    assert "3 different ways" in sent["messages"][0]["content"]
    meta = answer.to_dict()["metadata"]
    assert meta["query_expansion"] == "llm" and meta["query_expansion_error"] == ""
    assert meta["search_phrasings"] == ["Remove limescale deposits", "vinegar descaling"]
    assert meta["search_query"] == QUESTION
    sources = [_file(s) for s in answer.sources]
    # RRF: found first by both phrasings, the limescale page outranks the question's own hit
    assert sources == ["limescale.md", "kettle.md"]
    assert [(c.number, c.supported) for c in answer.citations] == [(1, True)]

    # the confidence gate saw each hit's cosine to the question asked, not to a phrasing
    # (the answerer embeds the passage text again, so within 0.02 of the index's cosine)
    def cosines(query: str) -> dict[str, float | None]:
        return {h.chunk.id: h.vector_score for h in rag.search(query, mode="vector").hits}

    asked, phrased = cosines(QUESTION), cosines("Remove limescale deposits")
    limescale = answer.sources[0].hit
    assert limescale.vector_score == pytest.approx(asked[limescale.chunk.id], abs=0.02)
    assert abs((limescale.vector_score or 0.0) - (phrased[limescale.chunk.id] or 0.0)) > 0.1


@pytest.mark.parametrize("fault", ["status", "timeout"])
def test_multi_query_failing_llm_searches_the_question_alone(
    fault: str,
    llm_server: tuple[str, Any],
    make_rag: Callable[..., Ragline],
    kettle_docs: Path,
) -> None:
    url, llm = llm_server
    rag = _rag(make_rag, url, kettle_docs, llm_timeout_s=1.0)
    if fault == "status":
        llm.script.append(("status", 500, {}, "internal error"))
    else:
        llm.script.append(("sleep", 3.0))
    llm.script.append(("stream", ["The kettle boils water [1]."], "done"))
    answer = rag.ask(QUESTION, mode="bm25")
    meta = answer.to_dict()["metadata"]
    assert meta["query_expansion"] == "failed" and meta["search_phrasings"] == []
    assert ("500" if fault == "status" else "Timeout") in meta["query_expansion_error"]
    assert [_file(s) for s in answer.sources] == ["kettle.md"]
    assert answer.complete and "kettle" in answer.text.lower()
