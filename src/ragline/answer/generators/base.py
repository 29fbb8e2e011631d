"""The Generator protocol: one interface for every way of writing an answer.

A generator turns a question and its numbered context into text with ``[n]``
citations, as a stream of deltas. It never retrieves, never decides whether to
answer (the answerer has done that, see :mod:`ragline.answer.confidence`) and
never trusts its own citations (see :mod:`ragline.answer.citations`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ragline.answer.context import Context
from ragline.errors import FaultError

if TYPE_CHECKING:
    from ragline.answer.judging import ContextEvidence

ROLES = ("user", "assistant")


class GenerationError(FaultError):
    """Generation failed (endpoint refused, timed out, stream cut); the deltas
    already yielded are a partial answer."""


class GenerationDeadline(GenerationError):
    """The whole answer did not arrive within the generation deadline
    (``RAGLINE_LLM_DEADLINE_S``): the answerer gives the extractive answer instead,
    even when part of this one was streamed."""


@dataclass(frozen=True, slots=True)
class Message:
    """One earlier turn of the conversation."""

    role: str  # "user" | "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """What a generator answers from."""

    question: str
    context: Context
    history: tuple[Message, ...] = ()
    selected_text: str = ""
    #: The answerer's evidence check of ``question`` against this ``context``, when it
    #: made one: the extractive generator leads with its verdict instead of judging
    #: every sentence a second time.
    evidence: ContextEvidence | None = None


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of the answer text, or (at the end) the token usage of the call."""

    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)


@runtime_checkable
class Generator(Protocol):
    """Writes an answer with ``[n]`` citations from a request's context."""

    @property
    def name(self) -> str:
        """Kind of generator ("extractive", "openai")."""
        ...

    @property
    def model(self) -> str:
        """The model used ("" when there is none)."""
        ...

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        """Answer deltas in order; raises :class:`GenerationError` on failure."""
        ...
