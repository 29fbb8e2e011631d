"""The PostgreSQL store: connection, pool, timeouts, HNSW build, BM25 scoring."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragline.settings.common import Section, _env


class PostgresSettings(Section):
    """The PostgreSQL backend (STORE_URL postgres)."""

    # --- PostgreSQL store (see docs/scale.md) ----------------------------------------
    database_url: str = Field(
        "",
        validation_alias=_env("DATABASE_URL"),
        description="PostgreSQL URL used when STORE_URL is 'postgres'.",
    )
    database_read_url: str = Field(
        "",
        validation_alias=_env("DATABASE_READ_URL"),
        description="A read replica: PostgreSQL search reads go there when set.",
    )
    pg_pool_size: int = Field(8, ge=1, le=1000, description="PostgreSQL connections per pool.")
    pg_statement_timeout_s: float = Field(
        30.0, ge=0, le=86_400, description="Longest one PostgreSQL statement may run; 0 = no limit."
    )
    pg_write_timeout_s: float = Field(
        600.0, ge=0, le=86_400, description="Longest one write statement (a batch COPY) may run."
    )
    pg_connect_timeout_s: float = Field(
        10.0, gt=0, le=600, description="Wait for a PostgreSQL connection (per attempt)."
    )
    pg_max_retries: int = Field(
        4, ge=0, le=20, description="Retries of a PostgreSQL call after a lost connection."
    )
    pg_retry_base_s: float = Field(
        0.25, gt=0, le=60, description="First backoff after a lost connection (doubles, ≤ 5 s)."
    )
    pg_maintenance_work_mem_mb: int = Field(
        512, ge=1, le=1_048_576, description="Memory for building the HNSW index (MB)."
    )
    hnsw_m: int = Field(16, ge=2, le=100, description="HNSW graph degree (PostgreSQL).")
    hnsw_ef_construction: int = Field(
        64, ge=4, le=1000, description="HNSW build breadth (PostgreSQL)."
    )
    pg_bm25_scorer: Literal["numpy", "sql"] = Field(
        "numpy",
        description="Where PostgreSQL BM25 is scored: 'numpy' (packed postings read in one "
        "statement, scored client side) or 'sql' (in the server, MaxScore-pruned). Same top-k.",
    )
    pg_bm25_repack_fraction: float = Field(
        0.05,
        ge=0,
        le=1,
        description="optimize() packs the PostgreSQL BM25 postings again once this share of "
        "the chunks was written or deleted since the last packing.",
    )
    pg_bm25_probe_postings: int = Field(
        5_000,
        ge=1,
        le=10_000_000,
        description="Postings the numpy BM25 scorer scores first to find the k-th best score "
        "it prunes against (chosen on the 1M index: results/postgres.md).",
    )
    pg_bm25_prune_min_postings: int = Field(
        100_000,
        ge=0,
        le=1_000_000_000,
        description="Queries with fewer postings are scored in full by the numpy BM25 scorer "
        "(pruning's lookups cost more below; results/postgres.md).",
    )
