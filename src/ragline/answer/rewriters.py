"""The follow-up rewriter and the multi-query expander the settings ask for, using the
configured generator's LLM."""

from __future__ import annotations

from typing import Any

import httpx

from ragline.answer.generators.base import Generator
from ragline.answer.generators.openai import parse_sse_data
from ragline.retrieve.conversation import CarryOverRewriter, ChatRewriter, QueryRewriter
from ragline.retrieve.multiquery import ChatExpander, QueryExpander
from ragline.settings import AnswerSettings

#: A rewritten question is short; more tokens would only be a model rambling.
REWRITE_MAX_TOKENS = 96
#: Tokens allowed per phrasing of multi-query rewriting (a line of a short question).
PHRASING_MAX_TOKENS = 64


def make_rewriter(settings: AnswerSettings, generator: Generator) -> QueryRewriter | None:
    """None when rewriting is off; an LLM rewriter when the generator is an LLM."""
    if settings.query_rewrite == "off":
        return None
    carry = CarryOverRewriter(settings.query_rewrite_max_terms)
    if settings.query_rewrite == "carry-over":
        return carry
    if generator.name == "openai":
        return ChatRewriter(_openai_complete(generator, settings), settings.query_rewrite_max_terms)
    if generator.name == "local":
        return ChatRewriter(_local_complete(generator), settings.query_rewrite_max_terms)
    return carry


def make_expander(settings: AnswerSettings, generator: Generator) -> QueryExpander | None:
    """An LLM expander when multi-query rewriting is on and the generator is an LLM."""
    if not settings.multi_query or generator.name not in ("openai", "local"):
        return None
    tokens = PHRASING_MAX_TOKENS * settings.multi_query_count
    complete = (
        _openai_complete(generator, settings, tokens)
        if generator.name == "openai"
        else _local_complete(generator, tokens)
    )
    return ChatExpander(complete, settings.multi_query_count, settings.multi_query_max_chars)


def _openai_complete(
    generator: Any, settings: AnswerSettings, max_tokens: int = REWRITE_MAX_TOKENS
) -> Any:
    def complete(messages: list[dict[str, str]]) -> str:
        headers = {"Authorization": f"Bearer {generator.api_key}"} if generator.api_key else {}
        body = {
            "model": generator.model,
            "messages": messages,
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "stream": False,
        }
        resp = httpx.post(generator.url, json=body, headers=headers, timeout=settings.llm_timeout_s)
        resp.raise_for_status()
        if resp.headers.get("content-type", "").startswith("text/event-stream"):
            return _sse_text(resp.text)  # a server that streams whatever was asked
        return str(resp.json()["choices"][0]["message"]["content"])

    return complete


def _sse_text(body: str) -> str:
    parts: list[str] = []
    for line in body.splitlines():
        event = parse_sse_data(line)
        if isinstance(event, dict):
            for choice in event.get("choices") or []:
                parts.append(str((choice.get("delta") or {}).get("content") or ""))
    return "".join(parts)


def _local_complete(generator: Any, max_tokens: int = REWRITE_MAX_TOKENS) -> Any:
    def complete(messages: list[dict[str, str]]) -> str:
        return str(generator.complete(messages, max_tokens))

    return complete
