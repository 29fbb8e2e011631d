"""What the sections share: the base of a section, the env-name helper, the choice
types, the confidence scale of embedders and the one-line error for the commands."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, ValidationError

MergeMethod = Literal["rrf", "weighted", "rrf_rerank"]
ChunkerName = Literal["section", "recursive"]
EmbedderName = Literal["auto", "onnx", "sentence-transformers", "openai", "e5"]
RerankerName = Literal["heuristic", "cross-encoder", "reader"]
GeneratorName = Literal["extractive", "openai", "local"]
UnsupportedPolicy = Literal["flag", "remove"]


#: (confidence_min, confidence_high) of an embedder whose cosine scale is not MiniLM's,
#: used unless set. multilingual-e5-small (benchmarks/results/languages.md, react.dev):
#: the top cosines of in-scope questions are 0.90–0.94, of out-of-scope ones median
#: 0.805, max 0.930; 0.88 answers every in-scope question and 1 of 48 out-of-scope.
CONFIDENCE_DEFAULTS: dict[str, tuple[float, float]] = {"e5": (0.88, 0.92)}


def _env(name: str) -> AliasChoices:
    """Accept the spec's bare name, the RAGLINE_-prefixed one and the field name."""
    return AliasChoices(name, f"RAGLINE_{name}", name.lower())


def invalid_setting(error: ValidationError) -> str:
    """The first problem of a settings error in one line naming the setting, for the
    command lines (pydantic's own message spans many lines and names the model)."""
    first = error.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "settings"
    return f"invalid setting {field}: {first['msg']}"


class Section(BaseModel):
    """One group of settings. ``Settings`` inherits every section (so it reads them all
    from the environment); a component that reads one group only is typed with its
    section, so it cannot reach into another's. Built alone, a section validates
    like ``Settings`` but reads no environment."""

    # defer_build: a section's own validator is built on its first use, not at import;
    # most processes only build ``Settings`` (≈ 20 ms of a cold command, issue 26).
    model_config = ConfigDict(
        extra="ignore", populate_by_name=True, validate_default=True, defer_build=True
    )
