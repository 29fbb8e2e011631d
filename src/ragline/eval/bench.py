"""`ragline bench`: ingestion throughput, search latency at scale, memory, disk.

What it measures, on the configured embedder, store and settings:

* **ingestion** of a folder into a throw-away index: chunks/s, the share of the
  time spent in each stage (parse, chunk, embed, write, … from the ingest
  report's stage seconds), against the model's raw throughput: one
  ``embed_documents`` call over the same chunks' ``embed_text``;
* **search latency** p50/p95/p99 per mode at each scale, on synthetic indexes
  (:mod:`ragline.eval.synthetic`) whose pool is the ingested chunks with their
  real vectors: *search only* (an embedder returning precomputed query vectors,
  so the time is store + fusion) and *end to end* (the real query embedding);
* **memory**: peak resident memory of the process while building and while
  searching each index (see :class:`~ragline.eval.machine.PeakRss` for which
  counter), and the **index size on disk**.

Every index lives in a temporary folder that is removed afterwards. Timings are
wall clock on a possibly shared machine, so the report records the load average
and the CPU share other processes used during each timed block.

This module measures; the report's records and their rendering live in
:mod:`ragline.eval.bench_report` (re-exported here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragline.embed.base import Embedder, Vectors
from ragline.engine import Ragline
from ragline.eval.bench_report import (
    BenchConfig,
    BenchReport,
    IngestResult,
    Latency,
    ScaleResult,
    mib,
    percentile,
    render_markdown,
    rich_tables,
    stage_shares_text,
)
from ragline.eval.machine import PeakRss, Phase, dir_bytes, load_average, machine_info
from ragline.eval.synthetic import (
    DOC_CHUNKS,
    PrecomputedEmbedder,
    Synthetic,
    Window,
    build_index,
    pseudo_queries,
)
from ragline.retrieve.retriever import SEARCH_MODES, Retriever, SearchMode
from ragline.settings import Settings
from ragline.store.factory import make_store

__all__ = [
    "INGEST_STAGES",
    "MAX_SCALE",
    "BenchConfig",
    "BenchReport",
    "IngestResult",
    "Latency",
    "Log",
    "ScaleResult",
    "describe_synthetic",
    "load_queries",
    "measure_latency",
    "mib",
    "parse_modes",
    "parse_scales",
    "percentile",
    "render_markdown",
    "rich_tables",
    "run_bench",
    "stage_shares_text",
]

#: Stages an ingest report times, in pipeline order.
INGEST_STAGES = ("hash", "parse", "chunk", "embed", "write", "delete", "optimize")
MAX_SCALE = 100_000_000
_SCALE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")

Log = Callable[[str], None]


def parse_scales(text: str) -> list[int]:
    """``"10k,100k,1m"`` → ``[10000, 100000, 1000000]`` (sorted, distinct)."""
    out: set[int] = set()
    for part in text.split(","):
        m = _SCALE.match(part)
        if not m:
            raise ValueError(f"--scale: {part.strip()!r} is not a count like 500, 10k or 1m")
        value = float(m.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()]
        n = int(value)
        if n != value or not 1 <= n <= MAX_SCALE:
            raise ValueError(
                f"--scale: {part.strip()!r} must be a whole number of chunks "
                f"from 1 to {MAX_SCALE:,}"
            )
        out.add(n)
    if not out:
        raise ValueError("--scale: give at least one size")
    return sorted(out)


def parse_modes(text: str) -> list[SearchMode]:
    """``"bm25,hybrid"`` → the modes, in the order given."""
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in SEARCH_MODES]
    if bad or not modes:
        raise ValueError(f"--modes: use {', '.join(SEARCH_MODES)}; got {text!r}")
    return list(dict.fromkeys(modes))  # type: ignore[arg-type]


def load_queries(path: Path) -> list[str]:
    """Queries from a file: JSON lines with a ``text`` field (BEIR queries.jsonl) or
    one query per line of plain text."""
    out: list[str] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    text = json.loads(line)["text"]
                except (ValueError, KeyError, TypeError) as e:
                    raise ValueError(
                        f"{path}:{n}: expected a JSON object with 'text' ({e})"
                    ) from None
                if not isinstance(text, str):
                    raise ValueError(f"{path}:{n}: 'text' must be a string")
                line = text.strip()
            if line:
                out.append(line)
    return list(dict.fromkeys(out))


def _settings_summary(s: Settings, store_kind: str, model: str) -> dict[str, Any]:
    return {
        "store": store_kind,
        "model": model,
        "embed_threads": s.embed_threads,
        "chunker": s.chunker,
        "chunk_max_tokens": s.effective_chunk_max_tokens,
        "write_batch_chunks": s.write_batch_chunks,
        "merge": s.hybrid_merge_method,
        "rrf_k": s.rrf_k,
        "candidates": s.candidates,
        "relevance_threshold": s.relevance_threshold,
        "ann_min_rows": s.ann_min_rows,
        "ann_nprobes": s.ann_nprobes,
        "ann_refine_factor": s.ann_refine_factor,
        "tenant": s.tenant,
    }


def _index_bytes(index_dir: Path) -> int | None:
    """Bytes the index takes in its folder; None when the store keeps nothing there
    (a server-side store)."""
    n = dir_bytes(index_dir)
    return n or None


def measure_latency(
    retriever: Retriever,
    warm: Sequence[str],
    queries: Sequence[str],
    mode: SearchMode,
    top_k: int,
) -> Latency:
    """``timings_ms`` of one search per query, after the unmeasured ``warm`` ones."""
    for q in warm:
        retriever.search(q, mode=mode, top_k=top_k, expand=0)
    with Phase() as phase:
        runs = [retriever.search(q, mode=mode, top_k=top_k, expand=0).timings_ms for q in queries]
    totals = [r["total"] for r in runs]
    embeds = [r["embed"] for r in runs]
    keys = [k for k in runs[0] if k != "total"]
    return Latency(
        p50=percentile(totals, 50),
        p95=percentile(totals, 95),
        p99=percentile(totals, 99),
        embed_p50=percentile(embeds, 50),
        embed_p95=percentile(embeds, 95),
        stages={k: statistics.median(r[k] for r in runs) for k in keys},
        others_cpu_share=phase.others_share,
    )


def _source_root(settings: Settings, embedder: Embedder) -> Path:
    """The folder the configured index was ingested from (the common parent of its
    documents' sources), for ``ragline bench`` without a PATH."""
    rag = Ragline(settings, embedder=embedder)
    try:
        sources = [r.source for r in rag.store.documents(settings.tenant)]
    finally:
        rag.close()
    if not sources:
        raise ValueError(
            f"no PATH given and the index in {settings.index_dir} holds no documents of "
            f"tenant {settings.tenant!r}: pass the folder to ingest"
        )
    root = Path(os.path.commonpath(sources))
    root = root if root.is_dir() else root.parent
    if not root.is_dir():
        raise ValueError(f"the index's source folder {root} no longer exists: pass a PATH")
    return root


def _measure_ingest(
    path: Path, settings: Settings, embedder: Embedder, index_dir: Path, log: Log
) -> tuple[IngestResult, list[Window], Vectors]:
    """Ingest ``path`` into ``index_dir``, then embed the same chunks raw; returns the
    figures and the ingested chunks (as windows) with their vectors."""
    s = settings.model_copy(update={"index_dir": index_dir})
    rag = Ragline(s, embedder=embedder)
    try:
        log(f"ingest {path}")
        with Phase() as ingest_phase, PeakRss() as mem:
            report = rag.ingest(path)
        windows: list[Window] = []
        texts: list[str] = []
        parts: list[Vectors] = []
        for chunks, vectors in rag.store.iter_chunks(1024):
            windows += [Window(c.title, c.chapter, c.text) for c in chunks]
            texts += [c.embed_text for c in chunks]
            parts.append(vectors)
    finally:
        rag.close()
    if not texts:
        failures = "; ".join(str(f) for f in report.failed[:3])
        raise ValueError(
            f"{path}: ingestion produced no chunks{' (' + failures + ')' if failures else ''}"
        )
    log(f"raw embedding of the same {len(texts)} chunks")
    with Phase() as raw:
        embedder.embed_documents(texts)
    seconds = report.seconds or ingest_phase.wall
    stages = {
        k: report.stage_seconds.get(k, 0.0) for k in INGEST_STAGES if k in report.stage_seconds
    }
    stages.update({k: v for k, v in report.stage_seconds.items() if k not in stages})
    result = IngestResult(
        path=str(path),
        files=report.files,
        failed=len(report.failed),
        chunks=report.chunks,
        tokens=report.tokens,
        seconds=seconds,
        chunks_per_s=report.chunks / seconds,
        raw_seconds=raw.wall,
        raw_chunks_per_s=len(texts) / raw.wall,
        ratio_to_raw=(report.chunks / seconds) / (len(texts) / raw.wall),
        stage_seconds=stages,
        stage_shares={k: min(1.0, v / seconds) for k, v in stages.items()},
        peak_rss_bytes=mem.peak,
        index_bytes=_index_bytes(index_dir),
        others_cpu_share=max(ingest_phase.others_share, raw.others_share),
    )
    return result, windows, np.concatenate(parts)


def describe_synthetic(pool: int, path: Path, config: BenchConfig, cosine: float) -> str:
    """How the scale indexes' chunks were made, for the report."""
    return (
        f"pool = the {pool:,} chunks ingested from {path} with their real vectors, in a "
        "seeded random order; row i < pool size is pool chunk i; every further row splices "
        "the first half of a random pool chunk's words with the second half of another's "
        "and carries the vector of a random pool chunk plus N(0, σ²) noise per component "
        f"(σ = {config.sigma}), re-normalised (mean cosine to its source {cosine:.3f}); "
        f"documents of {DOC_CHUNKS} chunks written with replace_documents in batches of "
        f"{config.batch_chunks} chunks, then optimize(); each scale is the prefix of the "
        "same row sequence"
    )


def run_bench(
    settings: Settings,
    config: BenchConfig,
    embedder: Embedder,
    log: Log = lambda _msg: None,
    on_scale: Callable[[BenchReport], None] | None = None,
) -> BenchReport:
    """Run every measurement of ``config`` and return the report (see the module doc).

    ``on_scale`` gets the report so far after each scale, so a long run (1M chunks
    on a small machine) leaves its finished scales behind even if it is stopped."""
    if settings.store_url:
        # Every scale writes up to a million synthetic rows into a throw-away index;
        # pointed at a configured server, they would land in the user's own store.
        raise ValueError(
            f"ragline bench builds throw-away embedded indexes and cannot run with "
            f"STORE_URL set ({settings.store_url.split('://')[0]}://…); unset it "
            "(benchmarks/postgres_search.py measures PostgreSQL against a scratch server)"
        )
    loads = [load_average()[0]]
    path = config.path if config.path is not None else _source_root(settings, embedder)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder")
    embedder.embed_documents(["warm-up: load the model and its runtime"] * 8)
    store_kind = "unknown"
    memory_method = "ru_maxrss"
    scales: list[ScaleResult] = []
    with tempfile.TemporaryDirectory(prefix="ragline-bench-", dir=config.work_dir) as tmp_name:
        tmp = Path(tmp_name)
        ingest, windows, vectors = _measure_ingest(path, settings, embedder, tmp / "ingest", log)
        loads.append(load_average()[0])
        shutil.rmtree(tmp / "ingest", ignore_errors=True)

        order = np.random.default_rng(config.seed).permutation(len(windows))
        pool = [windows[i] for i in order]
        data = Synthetic(pool, vectors[order], config.sigma, config.seed)
        if config.queries_file is not None:
            all_queries = load_queries(config.queries_file)
            if len(all_queries) < config.warmup + 1:
                raise ValueError(
                    f"{config.queries_file}: {len(all_queries)} queries; need more than --warmup"
                )
            all_queries = all_queries[: config.warmup + config.queries]
            query_source = f"{config.queries_file} (first {len(all_queries)})"
        else:
            all_queries = pseudo_queries(pool, config.warmup + config.queries, config.seed)
            query_source = "pseudo-queries: runs of 4–12 words cut from random pool chunks"
        warm, queries = all_queries[: config.warmup], all_queries[config.warmup :]
        fast_embedder = PrecomputedEmbedder(embedder, all_queries)

        def snapshot() -> BenchReport:
            """The report of what has been measured so far."""
            data_info = {
                "ingest_path": str(path),
                "pool_chunks": len(pool),
                "pool_embedded": data.embedded,
                "sigma": config.sigma,
                "noisy_cosine": round(data.noisy_cosine, 4),
                "doc_chunks": DOC_CHUNKS,
                "batch_chunks": config.batch_chunks,
                "seed": config.seed,
                "queries": len(queries),
                "warmup": len(warm),
                "query_source": query_source,
                "top_k": config.top_k,
                "how": describe_synthetic(len(pool), path, config, data.noisy_cosine),
            }
            return BenchReport(
                machine=machine_info(),
                settings=_settings_summary(settings, store_kind, embedder.fingerprint.name),
                data=data_info,
                ingest=ingest,
                scales=scales,
                memory_method=memory_method,
                loads=loads,
            )

        for rows in config.scales:
            index_dir = tmp / f"scale-{rows}"
            s = settings.model_copy(update={"index_dir": index_dir})
            store = make_store(s, embedder.dimension)
            store_kind = type(store).__name__
            try:
                log(f"{rows:,} chunks: building the index")
                with PeakRss() as build_mem:
                    build = build_index(
                        store, data, rows, config.batch_chunks, embedder.fingerprint, s.tenant
                    )
                memory_method = build_mem.method
                log(
                    f"{rows:,} chunks: written in {build.write_seconds:.1f} s, optimized in "
                    f"{build.optimize_seconds:.1f} s"
                )
                describe = store.abilities.describe
                vector_index = describe().get("vector_index") if describe else None
                fast = Retriever(store, fast_embedder, s)
                full = Retriever(store, embedder, s)
                only: dict[str, Latency] = {}
                e2e: dict[str, Latency] = {}
                with PeakRss() as search_mem:
                    for mode in config.modes:
                        log(f"{rows:,} chunks: {mode} search")
                        only[mode] = measure_latency(fast, warm, queries, mode, config.top_k)
                        e2e[mode] = measure_latency(full, warm, queries, mode, config.top_k)
                        loads.append(load_average()[0])
                        log(
                            f"{rows:,} chunks: {mode} p95 {only[mode].p95:.1f} ms search "
                            f"only, {e2e[mode].p95:.1f} ms end to end"
                        )
            finally:
                store.close()
            scales.append(
                ScaleResult(
                    chunks=rows,
                    spliced=data.spliced(rows),
                    write_seconds=build.write_seconds,
                    optimize_seconds=build.optimize_seconds,
                    writes=build.writes,
                    build_peak_rss_bytes=build_mem.peak,
                    search_peak_rss_bytes=search_mem.peak,
                    index_bytes=_index_bytes(index_dir),
                    vector_index=str(vector_index) if vector_index else None,
                    search_only=only,
                    end_to_end=e2e,
                )
            )
            shutil.rmtree(index_dir, ignore_errors=True)
            if on_scale is not None:
                on_scale(snapshot())

    return snapshot()
