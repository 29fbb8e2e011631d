"""Generators behind one protocol, chosen by ``settings.generator`` in one place."""

from __future__ import annotations

from ragline.answer.citations import EmbedTexts
from ragline.answer.generators.base import (
    Delta,
    GenerationError,
    GenerationRequest,
    Generator,
    Message,
)
from ragline.answer.generators.extractive import ExtractiveGenerator
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.settings import Settings

__all__ = [
    "Delta",
    "ExtractiveGenerator",
    "GenerationError",
    "GenerationRequest",
    "Generator",
    "Message",
    "OpenAIGenerator",
    "make_generator",
]


def make_generator(settings: Settings, embed: EmbedTexts) -> Generator:
    """The configured generator; ``embed`` feeds the extractive one's sentence choice."""
    if settings.generator == "openai":
        return OpenAIGenerator(
            settings.llm_base_url,
            settings.llm_model,
            api_key=settings.llm_api_key,
            temperature=settings.llm_temperature,
            max_tokens=settings.llm_max_tokens,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
    return ExtractiveGenerator(embed, max_sentences=settings.extractive_max_sentences)
