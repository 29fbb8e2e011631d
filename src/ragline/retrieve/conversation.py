"""A follow-up question made self-contained before it is searched.

"And how do I make it optional?" retrieves nothing useful on its own: the thing
"it" names was said one turn earlier. Two rewriters share one protocol:

* :class:`CarryOverRewriter` (no model): when the question reads as a
  follow-up (an anaphor or connector, or, naming no identifier of its own, too
  few content words to stand alone),
  the key terms of the previous user turns (identifiers, capitalised names,
  content words; CJK words by segmentation) are appended, most recent first.
* :class:`ChatRewriter`: an LLM rewrites the question from the conversation;
  it falls back to carrying terms over when the model fails or says nothing.

A question with no history, or one that stands alone, is searched as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ragline.text import words as lang_words
from ragline.text.bm25 import STOP_WORDS as ENGLISH_STOP_WORDS
from ragline.text.bm25 import split_words
from ragline.text.language import query_language


class Turn(Protocol):
    """A conversation message (``Message`` of the generators, or any alike)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


#: Words that make a question lean on the one before (whole words, lower case).
FOLLOW_UP_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset(
        [
            "it",
            "its",
            "it's",
            "this",
            "that",
            "these",
            "those",
            "they",
            "them",
            "their",
            "one",
            "ones",
            "also",
            "too",
            "and",
            "instead",
            "else",
            "another",
            "same",
            "there",
            "such",
        ]
    ),
    "es": frozenset(
        [
            "lo",
            "la",
            "los",
            "las",
            "le",
            "les",
            "eso",
            "esto",
            "ello",
            "este",
            "esta",
            "estos",
            "estas",
            "ese",
            "esa",
            "también",
            "y",
            "además",
            "otro",
            "otra",
            "mismo",
            "misma",
        ]
    ),
    "fr": frozenset(
        [
            "le",
            "la",
            "les",
            "lui",
            "leur",
            "ça",
            "cela",
            "ceci",
            "ce",
            "cet",
            "cette",
            "ces",
            "il",
            "elle",
            "ils",
            "elles",
            "aussi",
            "et",
            "autre",
            "même",
        ]
    ),
}
#: The same for unspaced scripts (substrings).
FOLLOW_UP_MARKS: dict[str, tuple[str, ...]] = {
    "ja": ("それ", "これ", "その", "この", "あれ", "そう", "も？", "は？", "では"),
    "zh": ("它", "这个", "那个", "这些", "那些", "这样", "那么", "呢", "也"),
}
#: A question with at most this many content words cannot stand alone.
MIN_STANDALONE_TERMS = 3

_IDENTIFIER = re.compile(r"`([^`]{2,60})`|\b([A-Za-z_$][\w$]*[A-Z][\w$]*|\w+\(\))")


@dataclass(frozen=True, slots=True)
class Rewrite:
    """The query searched, and how it came about (``"none"``, ``"carry-over"``, ``"llm"``)."""

    query: str
    method: str


class QueryRewriter(Protocol):
    def rewrite(self, question: str, history: Sequence[Turn]) -> Rewrite: ...


def content_terms(text: str, language: str | None = None) -> list[str]:
    """Surface words that carry a text's topic, in order, without repeats.

    Identifiers (``useState``, ``setState()``, anything in backticks) first,
    then the other words that are not stop words of the text's language (CJK
    runs segmented). Kept as written, since they are searched again.
    """
    lang = language or query_language(text)
    # English: NLTK's short list (stopwords-iso's English one holds "state", "value"…).
    stops = ENGLISH_STOP_WORDS if lang == "en" else ENGLISH_STOP_WORDS | lang_words.stop_words(lang)
    out: list[str] = []
    seen: set[str] = set()

    def add(word: str) -> None:
        key = word.lower()
        if key not in seen:
            seen.add(key)
            out.append(word)

    for m in _IDENTIFIER.finditer(text):
        add((m.group(1) or m.group(2)).strip())
    for word in split_words(text):
        if lang_words.has_cjk(word):
            for piece in lang_words.segment(word, lang):
                if len(piece) >= 2 and lang_words.has_cjk(piece) and piece not in stops:
                    add(piece)
        elif len(word) >= 3 and word.lower() not in stops and not word.isdigit():
            add(word)
    return out


def is_follow_up(question: str, language: str | None = None) -> bool:
    """True when ``question`` leans on an earlier turn (see the module docstring)."""
    lang = language or query_language(question)
    marks = FOLLOW_UP_MARKS.get(lang)
    if marks and any(m in question for m in marks):
        return True
    lowered = {w.lower() for w in split_words(question)}
    if lowered & FOLLOW_UP_WORDS.get(lang, FOLLOW_UP_WORDS["en"]):
        return True
    if _IDENTIFIER.search(question):  # names its own subject ("What does useMemo do?")
        return False
    return len(content_terms(question, lang)) <= MIN_STANDALONE_TERMS


def carry_over(
    question: str, history: Sequence[Turn], max_terms: int = 8, force: bool = False
) -> Rewrite:
    """``question`` plus the previous user turns' key terms, when it is a follow-up."""
    earlier = [t.content for t in history if t.role == "user" and t.content.strip()]
    if not earlier or not (force or is_follow_up(question)):
        return Rewrite(question, "none")
    have = {w.lower() for w in content_terms(question)}
    carried: list[str] = []
    for text in reversed(earlier):
        for term in content_terms(text):
            if term.lower() not in have and len(carried) < max_terms:
                have.add(term.lower())
                carried.append(term)
    if not carried:
        return Rewrite(question, "none")
    return Rewrite(f"{question} {' '.join(carried)}", "carry-over")


class CarryOverRewriter:
    """The model-free rewriter (:func:`carry_over`)."""

    def __init__(self, max_terms: int = 8) -> None:
        self.max_terms = max_terms

    def rewrite(self, question: str, history: Sequence[Turn]) -> Rewrite:
        return carry_over(question, history, self.max_terms)


#: A chat completion: messages in, the reply text out (raises on failure).
Complete = Callable[[list[dict[str, str]]], str]

REWRITE_PROMPT = (
    "Rewrite the user's last question so that it can be understood without the "
    "conversation: replace pronouns and vague references with what they refer to. "
    "Keep the question's language. Reply with the rewritten question only."
)


def rewrite_messages(question: str, history: Sequence[Turn]) -> list[dict[str, str]]:
    """The chat the LLM rewrites from: the instruction, the turns, the question."""
    convo = "\n".join(f"{t.role}: {' '.join(t.content.split())[:500]}" for t in history)
    return [
        {"role": "system", "content": REWRITE_PROMPT},
        {"role": "user", "content": f"Conversation:\n{convo}\n\nLast question: {question}"},
    ]


class ChatRewriter:
    """Rewrites with an LLM; carries terms over when the model fails or is empty."""

    def __init__(self, complete: Complete, max_terms: int = 8, max_chars: int = 500) -> None:
        self.complete = complete
        self.fallback = CarryOverRewriter(max_terms)
        self.max_chars = max_chars

    def rewrite(self, question: str, history: Sequence[Turn]) -> Rewrite:
        if not any(t.role == "user" for t in history):
            return Rewrite(question, "none")
        try:
            text = " ".join(self.complete(rewrite_messages(question, history)).split())
        except Exception:
            return self.fallback.rewrite(question, history)
        text = text.strip("\"'“”「」")
        if not text or len(text) > self.max_chars:
            return self.fallback.rewrite(question, history)
        return Rewrite(text, "llm")
