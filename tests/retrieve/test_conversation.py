"""Follow-ups made self-contained: carried-over terms, and the LLM rewriter's fallbacks."""

from __future__ import annotations

import pytest

from ragline.answer.generators.base import Message
from ragline.retrieve.conversation import (
    ChatRewriter,
    carry_over,
    content_terms,
    is_follow_up,
    rewrite_messages,
)

UPLOAD = [
    Message("user", "How do I upload files with FastAPI's UploadFile?"),
    Message("assistant", "Declare a parameter of type UploadFile [1]."),
]


def test_content_terms_keep_identifiers_and_topic_words() -> None:
    assert content_terms("How does the `useReducer` Hook manage state?") == [
        "useReducer",
        "Hook",
        "manage",
        "state",
    ]
    assert "状態" in content_terms("useReducer でステートと状態を管理する方法")


@pytest.mark.parametrize(
    ("question", "follow"),
    [
        ("And how do I make it optional?", True),
        ("What about the cleanup?", True),
        ("What does useMemo do?", False),  # names its own subject
        ("How do I pass props from a parent component to a child?", False),
        ("¿Y cómo lo reinicio?", True),
        ("それを初期化するには？", True),
        ("那它的参数呢？", True),
    ],
)
def test_is_follow_up(question: str, follow: bool) -> None:
    assert is_follow_up(question) is follow


def test_carry_over_appends_the_previous_topic_once() -> None:
    r = carry_over("And how do I make it optional?", UPLOAD)
    assert r.method == "carry-over"
    assert r.query.startswith("And how do I make it optional? ")
    assert "UploadFile" in r.query and "FastAPI" in r.query
    assert "Declare" not in r.query  # assistant turns are not carried
    assert carry_over("What does useMemo do?", UPLOAD).method == "none"
    assert carry_over("And this one?", []).method == "none"
    capped = carry_over("And it?", UPLOAD, max_terms=1)
    assert len(capped.query.split()) == 3


def test_chat_rewriter_uses_the_model_and_falls_back() -> None:
    seen: list[list[dict[str, str]]] = []

    def good(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return ' "How do I make an UploadFile parameter optional in FastAPI?" '

    r = ChatRewriter(good).rewrite("And how do I make it optional?", UPLOAD)
    assert (r.method, r.query) == (
        "llm",
        "How do I make an UploadFile parameter optional in FastAPI?",
    )
    assert "UploadFile" in seen[0][1]["content"]

    def broken(messages: list[dict[str, str]]) -> str:
        raise ConnectionError("endpoint down")

    r = ChatRewriter(broken).rewrite("And how do I make it optional?", UPLOAD)
    assert r.method == "carry-over" and "UploadFile" in r.query
    r = ChatRewriter(lambda m: "   ").rewrite("And how do I make it optional?", UPLOAD)
    assert r.method == "carry-over"
    assert ChatRewriter(good).rewrite("Anything?", []).method == "none"
    assert rewrite_messages("q", UPLOAD)[0]["role"] == "system"
