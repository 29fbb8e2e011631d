"""One typed settings object, read from the environment (and `.env`:
:mod:`ragline.settings.environment`).

The retrieval names of the specification (``RRF_K``, ``RETRIEVAL_TOP_K``, …) are
read as they are; everything else is prefixed ``RAGLINE_``. Every limit lives
here with a sane default, so nothing is hard-coded deeper in the pipeline.

The fields live in sections, one module each (store, ingest, embed, retrieve, the
LanceDB and PostgreSQL backends, answer, eval, serve); ``Settings`` inherits them
all. A component that reads one section only takes that section's type, and is
passed a ``Settings`` all the same.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, model_validator

from ragline.settings.answer import AnswerSettings
from ragline.settings.common import (
    CONFIDENCE_DEFAULTS,
    ChunkerName,
    EmbedderName,
    GeneratorName,
    MergeMethod,
    RerankerName,
    Section,
    UnsupportedPolicy,
    invalid_setting,
)
from ragline.settings.embed import EmbedSettings
from ragline.settings.environment import environment_values, read_dotenv
from ragline.settings.eval import EvalSettings
from ragline.settings.ingest import IngestSettings
from ragline.settings.lance import LanceSettings
from ragline.settings.postgres import PostgresSettings
from ragline.settings.retrieve import RetrieveSettings
from ragline.settings.serve import ServeSettings
from ragline.settings.store import StoreSettings

__all__ = [
    "CONFIDENCE_DEFAULTS",
    "SECTIONS",
    "AnswerSettings",
    "ChunkerName",
    "EmbedSettings",
    "EmbedderName",
    "EvalSettings",
    "GeneratorName",
    "IngestSettings",
    "LanceSettings",
    "MergeMethod",
    "PostgresSettings",
    "RerankerName",
    "RetrieveSettings",
    "Section",
    "ServeSettings",
    "Settings",
    "StoreSettings",
    "UnsupportedPolicy",
    "invalid_setting",
]

#: The sections in the pipeline's order (the order of docs/configuration.md).
SECTIONS: tuple[type[Section], ...] = (
    StoreSettings,
    IngestSettings,
    EmbedSettings,
    RetrieveSettings,
    LanceSettings,
    PostgresSettings,
    AnswerSettings,
    EvalSettings,
    ServeSettings,
)


# pydantic collects fields and validators from the last base to the first: the sections
# are listed backwards so both come in the pipeline's order (the checks run store,
# ingest, embed, retrieve, answer, then this class's own).
class Settings(
    ServeSettings,
    EvalSettings,
    AnswerSettings,
    PostgresSettings,
    LanceSettings,
    RetrieveSettings,
    EmbedSettings,
    IngestSettings,
    StoreSettings,
):
    """Everything ragline can be told, with the defaults it ships.

    ``Settings(**values)`` reads the environment and ``_env_file`` (``.env`` in the
    working folder; None: none) under ``values``."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, validate_default=True)

    if not TYPE_CHECKING:  # mypy keeps the pydantic plugin's __init__, typed per field

        def __init__(self, _env_file: str | Path | None = ".env", **values: Any) -> None:
            dotenv = read_dotenv(Path(_env_file)) if _env_file is not None else {}
            found = environment_values(type(self).model_fields, os.environ, dotenv, values)
            super().__init__(**found, **values)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        self._embedder_scale()
        # Under ``auto`` the model, hence the scale an unset bound takes, is known only
        # once an index is chosen (:meth:`with_embedder`): RAGLINE_CONFIDENCE_MIN=0.87
        # alone is e5's scale and must not be checked against MiniLM's 0.65.
        both_set = {"confidence_min", "confidence_high"} <= self.model_fields_set
        if self.embedder != "auto" or both_set:
            self._check_confidence()
        return self

    def _check_confidence(self) -> None:
        if self.confidence_high < self.confidence_min:
            raise ValueError(
                f"confidence_high ({self.confidence_high}) must not be below confidence_min "
                f"({self.confidence_min}; embedder {self.embedder})"
            )

    def _embedder_scale(self) -> None:
        scale = CONFIDENCE_DEFAULTS.get(self.embedder)
        if scale is not None:  # the embedder's own scale, where the user set nothing
            for name, value in zip(("confidence_min", "confidence_high"), scale, strict=True):
                if name not in self.model_fields_set:
                    object.__setattr__(self, name, value)

    def with_embedder(self, name: EmbedderName) -> Settings:
        """These settings with ``embedder`` resolved to ``name`` (what ``auto`` chose
        for an index), the confidence thresholds following that model's scale where
        the user set none."""
        if name == self.embedder:
            return self
        resolved = self.model_copy(update={"embedder": name})
        resolved._embedder_scale()
        resolved._check_confidence()
        return resolved

    @property
    def effective_chunk_max_tokens(self) -> int:
        """The section chunker's budget: the contract's 512, but never more than the
        embedding model reads (MiniLM truncates at 256 tokens)."""
        if not self.chunk_fit_model:
            return self.chunk_max_tokens
        window = self.embed_max_tokens - self.heading_allowance_tokens
        return max(self.chunk_overlap_tokens + 1, min(self.chunk_max_tokens, window))
