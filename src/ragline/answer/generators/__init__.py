"""Generators behind one protocol, chosen by ``settings.generator`` in one place."""

from __future__ import annotations

from ragline.answer.citations import EmbedTexts
from ragline.answer.evidence import evidence_weights
from ragline.answer.generators.base import (
    Delta,
    GenerationDeadline,
    GenerationError,
    GenerationRequest,
    Generator,
    Message,
)
from ragline.answer.generators.extractive import ExtractiveGenerator
from ragline.answer.generators.local import LocalGenerator, LocalModelUnavailable, context_window
from ragline.answer.generators.openai import OpenAIGenerator
from ragline.settings import AnswerSettings

__all__ = [
    "Delta",
    "ExtractiveGenerator",
    "GenerationDeadline",
    "GenerationError",
    "GenerationRequest",
    "Generator",
    "LocalGenerator",
    "LocalModelUnavailable",
    "Message",
    "OpenAIGenerator",
    "extractive_generator",
    "make_generator",
]


def make_generator(settings: AnswerSettings, embed: EmbedTexts) -> Generator:
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
            deadline_s=settings.llm_deadline_s,
        )
    if settings.generator == "local":
        return LocalGenerator(
            settings.local_model_path or None,
            temperature=settings.llm_temperature,
            max_tokens=settings.llm_max_tokens,
            n_ctx=settings.local_n_ctx
            or context_window(settings.max_context_tokens, settings.llm_max_tokens),
            n_threads=settings.local_threads or None,
            seed=settings.local_seed,
            max_blocks=settings.local_max_blocks,
            constrain_citations=settings.local_constrain_citations,
        )
    return extractive_generator(settings, embed)


def extractive_generator(settings: AnswerSettings, embed: EmbedTexts) -> ExtractiveGenerator:
    """The extractive generator as configured (evidence-led when the check is on): the
    default generator, and the stand-in when a language model fails."""
    evidence = evidence_weights(settings) if settings.evidence_check else None
    return ExtractiveGenerator(
        embed,
        max_sentences=settings.extractive_max_sentences,
        evidence=evidence,
        claim_extra_min=settings.extractive_claim_extra_min,
        claim_rank_weight=settings.extractive_claim_rank_weight,
        claim_other_document_ranks=settings.extractive_claim_other_document_ranks,
    )
