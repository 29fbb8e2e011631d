"""Evaluation (``ragline eval``): its throw-away indexes and chunk depth."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ragline.settings.common import Section


class EvalSettings(Section):
    """What `ragline eval` builds and retrieves."""

    # --- evaluation (ragline eval) ------------------------------------------------------
    eval_cache_dir: Path = Field(
        Path(".ragline-eval"),
        description="Where `ragline eval` keeps its throw-away indexes, one per corpus, "
        "model and chunking (reused when all three match).",
    )
    eval_write_batch_chunks: int = Field(
        512, ge=1, le=100_000, description="Eval ingest: chunks embedded and committed together."
    )
    eval_chunk_depth_factor: float = Field(
        2.0,
        ge=1,
        le=20,
        description="Eval: chunks retrieved per wanted document (a document's chunks can "
        "fill several places of a chunk ranking before it is cut to --top-k documents).",
    )
