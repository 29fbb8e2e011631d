"""The LanceDB store's in-memory mirror (ragline.store.lance)."""

from __future__ import annotations

from pydantic import Field

from ragline.settings.common import Section


class LanceSettings(Section):
    """The LanceDB backend: what its search mirror keeps in memory and how it scans."""

    # --- LanceDB store (retrieval) --------------------------------------------------
    lance_memory_index: bool = Field(
        True,
        description=(
            "LanceDB: search in-process indexes mirrored from the table (exact cosine, "
            "BM25 postings; refreshed when the table's version moves) instead of "
            "LanceDB's own vector and full-text queries. See benchmarks/results/profile.md."
        ),
    )
    lance_memory_rows: int = Field(
        200_000,
        ge=0,
        description=(
            "LanceDB mirror: up to this many chunks, their columns and float32 vectors stay "
            "in memory too, so the returned hits' rows are not read from disk (≈ 4 ms less "
            "per search), and so do BM25's per-posting saturations (8 bytes a posting: "
            "36.8 MiB for the synthetic 100k index; benchmarks/results/search_core.md, "
            "section 14); above it the vectors are int8 codes + float16 unit rows."
        ),
    )
    lance_int8_rows: int = Field(
        0,
        ge=0,
        description=(
            "LanceDB mirror: from this many chunks on, vector search scans int8 codes "
            "(a quarter of float32's bytes) and re-scores the best candidates exactly; "
            "below it, one float32 matrix product. 0: always (faster from SciFact's 9k "
            "chunks on, same top-200; benchmarks/results/search_core.md, section 5)."
        ),
    )
    lance_int8_rerank: float = Field(
        1.5,
        ge=1,
        le=50,
        description=(
            "LanceDB mirror: int8 vector candidates re-scored exactly, as a multiple of k "
            "(1.5: recall of the exact top-200 was 1.0 from 1.25 on, on SciFact train, "
            "the d2l questions and synthetic 100k; benchmarks/results/search_core.md, "
            "section 14)."
        ),
    )
    lance_int8_threads: int = Field(
        1,
        ge=1,
        le=64,
        description=(
            "LanceDB mirror: threads of one int8 vector scan (1: at 1M rows on 2 busy "
            "cores, 2 threads took 58 ms against 32–47 ms; concurrent searches use the "
            "cores already)."
        ),
    )
    lance_int8_dims: int = Field(
        256,
        ge=0,
        le=4096,
        description=(
            "LanceDB mirror, above lance_memory_rows: the int8 codes keep this many "
            "principal components (0: every dimension). 256 of 384 at 1M rows: a third "
            "fewer bytes scanned per query, recall of the exact top-200 0.999 with "
            "lance_int8_dims_rerank 20 (benchmarks/results/search_core.md, section 8)."
        ),
    )
    lance_int8_dims_rerank: int = Field(
        20,
        ge=1,
        le=200,
        description=(
            "LanceDB mirror: candidates of the principal-component codes re-scored from "
            "the float16 rows, as a multiple of k (1M rows: 10 → recall 0.998, 20 → 0.999)."
        ),
    )
    lance_bm25_prune_rows: int = Field(
        250_000,
        ge=0,
        le=1_000_000_000,
        description=(
            "LanceDB mirror: from this many rows on, BM25 top-k skips postings that cannot "
            "reach it (MaxScore, exact); below, scoring every posting is faster (100k rows: "
            "1.52x slower pruned, 1M: 0.60x; benchmarks/results/search_core.md, section 7)."
        ),
    )
    lance_parallel_rows: int = Field(
        100_000,
        ge=0,
        le=1_000_000_000,
        description=(
            "LanceDB mirror: from this many rows on, a hybrid search runs its vector scan "
            "on a worker thread while BM25 runs in the caller, when no other search is in "
            "flight in the process and a core is idle (same results). 100k: with a core "
            "idle, 0.73x the search time at 100k rows, 1.12-1.14x at 9-10k (the smaller "
            "stage 2-5 hand-offs long); benchmarks/results/parallel_stages.md."
        ),
    )
