"""Retrieval: hybrid search, fusion, boosts, reranking, expansion, ANN search."""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator

from ragline.settings.common import MergeMethod, RerankerName, Section, _env
from ragline.types import FieldBoosts


class RetrieveSettings(Section):
    """How a query finds its chunks."""

    # --- retrieval -----------------------------------------------------------------
    hybrid_search_enabled: bool = Field(True, validation_alias=_env("HYBRID_SEARCH_ENABLED"))
    # Retrieval defaults tuned on SciFact train (benchmarks/tune_scifact.py,
    # benchmarks/results/tuning.md): weighted 0.4/0.6 over 200 candidates, title ×0.5.
    hybrid_merge_method: MergeMethod = Field(
        "weighted", validation_alias=_env("HYBRID_MERGE_METHOD")
    )
    hybrid_vector_weight: float = Field(
        0.4, ge=0, le=1, validation_alias=_env("HYBRID_VECTOR_WEIGHT")
    )
    hybrid_keyword_weight: float = Field(
        0.6, ge=0, le=1, validation_alias=_env("HYBRID_KEYWORD_WEIGHT")
    )
    rrf_k: int = Field(60, ge=1, le=10_000, validation_alias=_env("RRF_K"))
    retrieval_top_k: int = Field(10, ge=1, le=1000, validation_alias=_env("RETRIEVAL_TOP_K"))
    relevance_threshold: float = Field(
        0.0,
        ge=-1,
        le=1,
        validation_alias=_env("RELEVANCE_THRESHOLD"),
        description="Drop hits whose cosine similarity to the query is below this (0 = keep all).",
    )
    candidates: int = Field(200, ge=1, le=10_000, description="Per-retriever depth before fusion.")
    boost_title: float = Field(0.5, ge=0)
    boost_headings: float = Field(1.5, ge=0)
    boost_text: float = Field(1.0, ge=0)
    reranker: RerankerName = "heuristic"
    reranker_model: str = Field("", description="Local path of a cross-encoder model.")
    rerank_depth: int = Field(30, ge=1, le=1000)
    expand_neighbours: int = Field(0, ge=0, le=10, description="Chunks before/after each hit.")
    expand_token_budget: int = Field(2000, ge=0)
    expand_section: bool = Field(
        False, description="Graph expansion: also add the rest of each hit's section."
    )
    expand_section_span: int = Field(
        4, ge=0, le=50, description="How many positions away a section's chunks are sought."
    )
    ann_min_rows: int = Field(50_000, ge=0, description="Below this, vector search is exact.")
    ann_ef: int = Field(100, ge=1, le=10_000, description="HNSW ef at query time.")
    ann_nprobes: int = Field(20, ge=1, le=10_000)
    ann_refine_factor: int = Field(
        2,
        ge=1,
        le=100,
        description="Approximate vector hits re-ranked at full precision, as a multiple of k.",
    )

    @model_validator(mode="after")
    def _check_retrieve(self) -> Self:
        if self.reranker == "cross-encoder" and not self.reranker_model:
            raise ValueError("reranker 'cross-encoder' needs RAGLINE_RERANKER_MODEL")
        return self

    @property
    def boosts(self) -> FieldBoosts:
        return FieldBoosts(
            title=self.boost_title, headings=self.boost_headings, text=self.boost_text
        )
