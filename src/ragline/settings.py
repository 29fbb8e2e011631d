"""One typed settings object, read from the environment (and `.env`).

The retrieval names of the specification (``RRF_K``, ``RETRIEVAL_TOP_K``, …) are
read as they are; everything else is prefixed ``RAGLINE_``. Every limit lives
here with a sane default, so nothing is hard-coded deeper in the pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ragline.store.base import FieldBoosts

MergeMethod = Literal["rrf", "weighted", "rrf_rerank"]
ChunkerName = Literal["section", "recursive"]
EmbedderName = Literal["onnx", "sentence-transformers", "openai"]
RerankerName = Literal["heuristic", "cross-encoder"]


def _env(name: str) -> AliasChoices:
    """Accept the spec's bare name, the RAGLINE_-prefixed one and the field name."""
    return AliasChoices(name, f"RAGLINE_{name}", name.lower())


class Settings(BaseSettings):
    """Everything ragline can be told, with the defaults it ships."""

    model_config = SettingsConfigDict(
        env_prefix="RAGLINE_",
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
        validate_default=True,
    )

    # --- where -----------------------------------------------------------------
    index_dir: Path = Field(Path(".ragline"), description="Folder of the embedded index.")
    tenant: str = Field("default", min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")
    base_url: str = Field("", description="Prefix for chunk URLs (e.g. a docs site); file URLs when empty.")

    # --- ingestion ---------------------------------------------------------------
    chunker: ChunkerName = "section"
    chunk_max_tokens: int = Field(512, ge=32, le=8192)
    chunk_overlap_tokens: int = Field(50, ge=0, le=1024)
    chunk_min_tokens: int = Field(100, ge=0, le=4096)
    recursive_chunk_chars: int = Field(500, ge=50, le=100_000)
    recursive_overlap_chars: int = Field(50, ge=0, le=10_000)
    max_file_bytes: int = Field(20 * 1024 * 1024, ge=1, description="Larger files fail alone.")
    extensions: tuple[str, ...] = (".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf")

    # --- embeddings --------------------------------------------------------------
    embedder: EmbedderName = "onnx"
    embed_model: str = Field("", description="Model path/name for sentence-transformers or openai.")
    embed_batch_size: int = Field(32, ge=1, le=4096)
    embed_max_tokens: int = Field(256, ge=8, le=8192, description="Model truncation length.")
    embed_threads: int = Field(0, ge=0, le=256, description="ONNX intra-op threads; 0 = all cores.")
    embed_base_url: str = Field("", validation_alias=_env("EMBED_BASE_URL"))
    embed_api_key: str = Field("", validation_alias=_env("EMBED_API_KEY"))
    embed_timeout_s: float = Field(30.0, gt=0, validation_alias=_env("EMBED_TIMEOUT_S"))
    embed_max_retries: int = Field(6, ge=0, le=20, validation_alias=_env("EMBED_MAX_RETRIES"))
    embed_dimension: int = Field(0, ge=0, description="Remote model dimension; 0 = probe it.")

    # --- retrieval -----------------------------------------------------------------
    hybrid_search_enabled: bool = Field(True, validation_alias=_env("HYBRID_SEARCH_ENABLED"))
    hybrid_merge_method: MergeMethod = Field("rrf", validation_alias=_env("HYBRID_MERGE_METHOD"))
    hybrid_vector_weight: float = Field(0.4, ge=0, le=1, validation_alias=_env("HYBRID_VECTOR_WEIGHT"))
    hybrid_keyword_weight: float = Field(
        0.6, ge=0, le=1, validation_alias=_env("HYBRID_KEYWORD_WEIGHT")
    )
    rrf_k: int = Field(60, ge=1, le=10_000, validation_alias=_env("RRF_K"))
    retrieval_top_k: int = Field(10, ge=1, le=1000, validation_alias=_env("RETRIEVAL_TOP_K"))
    relevance_threshold: float = Field(
        0.0, ge=-1, le=1, validation_alias=_env("RELEVANCE_THRESHOLD"),
        description="Drop hits whose cosine similarity to the query is below this (0 = keep all).",
    )
    candidates: int = Field(100, ge=1, le=10_000, description="Per-retriever depth before fusion.")
    boost_title: float = Field(2.0, ge=0)
    boost_headings: float = Field(1.5, ge=0)
    boost_text: float = Field(1.0, ge=0)
    reranker: RerankerName = "heuristic"
    reranker_model: str = Field("", description="Local path of a cross-encoder model.")
    rerank_depth: int = Field(30, ge=1, le=1000)
    expand_neighbours: int = Field(0, ge=0, le=10, description="Chunks before/after each hit.")
    expand_token_budget: int = Field(2000, ge=0)
    ann_min_rows: int = Field(50_000, ge=0, description="Below this, vector search is exact.")
    ann_ef: int = Field(100, ge=1, le=10_000, description="HNSW ef at query time.")
    ann_nprobes: int = Field(20, ge=1, le=10_000)

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.chunk_overlap_tokens >= self.chunk_max_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than chunk_max_tokens")
        if self.recursive_overlap_chars >= self.recursive_chunk_chars:
            raise ValueError("recursive_overlap_chars must be smaller than recursive_chunk_chars")
        if self.embedder == "openai" and not self.embed_base_url:
            raise ValueError("embedder 'openai' needs EMBED_BASE_URL")
        if self.embedder == "sentence-transformers" and not self.embed_model:
            raise ValueError("embedder 'sentence-transformers' needs RAGLINE_EMBED_MODEL")
        if self.reranker == "cross-encoder" and not self.reranker_model:
            raise ValueError("reranker 'cross-encoder' needs RAGLINE_RERANKER_MODEL")
        return self

    @property
    def boosts(self) -> FieldBoosts:
        return FieldBoosts(title=self.boost_title, headings=self.boost_headings, text=self.boost_text)
