"""Greetings and small talk: a short reply without retrieval or generation.

"hi", "thanks!" or "who are you?" are not questions about the documents; sending
them through retrieval would answer with random passages or a fallback that
sounds like an error. A message counts as small talk only when every clause of
it is a known phrase, so "hi, what is dropout?" is still answered.
"""

from __future__ import annotations

import re

_PHRASES: dict[str, frozenset[str]] = {
    "identity": frozenset(
        [
            "who are you",
            "what are you",
            "what can you do",
            "what can i ask",
            "what can i ask you",
            "what do you do",
            "help",
            "are you a bot",
            "are you human",
            "what is your name",
            "whats your name",
        ]
    ),
    "thanks": frozenset(
        [
            "thanks",
            "thank you",
            "thanks a lot",
            "thank you very much",
            "thank you so much",
            "many thanks",
            "thx",
            "ty",
            "cheers",
            "much appreciated",
            "thanks so much",
            "great thanks",
            "ok thanks",
            "okay thanks",
            "perfect thanks",
            "thanks again",
        ]
    ),
    "bye": frozenset(
        [
            "bye",
            "goodbye",
            "bye bye",
            "see you",
            "see ya",
            "see you later",
            "good night",
            "cya",
            "later",
        ]
    ),
    "greeting": frozenset(
        [
            "hi",
            "hello",
            "hey",
            "hiya",
            "howdy",
            "yo",
            "greetings",
            "good morning",
            "good afternoon",
            "good evening",
            "good day",
            "hi there",
            "hello there",
            "hey there",
            "sup",
            "how are you",
            "how are you doing",
            "how is it going",
            "hows it going",
            "whats up",
            "how do you do",
            "nice to meet you",
        ]
    ),
    "ack": frozenset(
        [
            "ok",
            "okay",
            "cool",
            "great",
            "nice",
            "awesome",
            "got it",
            "i see",
            "alright",
            "sure",
            "perfect",
        ]
    ),
}

_REPLIES = {
    "identity": "I answer questions from the indexed documents and cite the passages I use. "
    "Ask me about anything they cover.",
    "thanks": "You're welcome! Ask me anything else about the documents.",
    "bye": "Goodbye!",
    "greeting": "Hello! Ask me a question about the documents and I'll answer from them, "
    "with citations.",
    "ack": "Ask me a question about the documents whenever you're ready.",
}

_ADDRESS = {"bot", "ragline", "there", "friend", "again", "everyone", "all"}
_CLAUSES = re.compile(r"[,.!?;:]+|\band\b")


def _normalise(text: str) -> str:
    text = text.lower().replace("’", "'").replace("'", "")
    return re.sub(r"[^a-z,.!?;:\s]", " ", text)


def smalltalk_kind(message: str) -> str | None:
    """The kind of small talk ``message`` is, or None for anything else."""
    clauses = [" ".join(c.split()) for c in _CLAUSES.split(_normalise(message))]
    clauses = [c for c in clauses if c]
    if not clauses or len(" ".join(clauses).split()) > 8:
        return None
    kinds: set[str] = set()
    for clause in clauses:
        words = clause.split()
        while len(words) > 1 and words[-1] in _ADDRESS:  # "hi bot", "thanks again"
            if " ".join(words) in _PHRASES["greeting"] | _PHRASES["thanks"]:
                break
            words = words[:-1]
        phrase = " ".join(words)
        kind = next((k for k, ps in _PHRASES.items() if phrase in ps), None)
        if kind is None:
            return None
        kinds.add(kind)
    return next(k for k in _PHRASES if k in kinds)


def smalltalk_reply(message: str) -> str | None:
    """A short reply to small talk, or None when ``message`` is a real question."""
    kind = smalltalk_kind(message)
    return _REPLIES[kind] if kind else None
