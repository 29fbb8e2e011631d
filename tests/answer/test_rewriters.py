"""The follow-up rewriter the settings pick, and the LLM rewrite over real HTTP."""

from __future__ import annotations

from ragline.answer.generators.base import Message
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.answer.rewriters import make_rewriter
from ragline.retrieve.conversation import CarryOverRewriter, ChatRewriter
from ragline.settings import Settings

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
