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
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import RenderableType

from ragline.embed.base import Embedder, Vectors
from ragline.engine import Ragline
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
from ragline.tables import fit_table, pairs_table

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


def percentile(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if xs else 0.0


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to measure; every field has the CLI option of the same name."""

    path: Path | None = None
    scales: tuple[int, ...] = (10_000, 100_000)
    modes: tuple[SearchMode, ...] = ("bm25", "vector", "hybrid")
    queries: int = 200
    warmup: int = 20
    top_k: int = 10
    queries_file: Path | None = None
    sigma: float = 0.03
    seed: int = 7
    batch_chunks: int = 2000
    work_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.queries < 1 or self.warmup < 0 or self.top_k < 1 or self.batch_chunks < 1:
            raise ValueError("queries, top_k and batch_chunks must be ≥ 1 and warmup ≥ 0")
        if not self.scales or not self.modes:
            raise ValueError("give at least one scale and one mode")


@dataclass(slots=True)
class IngestResult:
    path: str
    files: int
    failed: int
    chunks: int
    tokens: int
    seconds: float
    chunks_per_s: float
    raw_seconds: float
    raw_chunks_per_s: float
    ratio_to_raw: float  # ingest chunks/s ÷ raw chunks/s
    stage_seconds: dict[str, float]
    stage_shares: dict[str, float]  # stage seconds ÷ total ingest seconds (sum ≤ 1)
    peak_rss_bytes: int
    index_bytes: int | None
    others_cpu_share: float  # the larger of the ingest and raw runs


@dataclass(slots=True)
class Latency:
    p50: float
    p95: float
    p99: float
    embed_p50: float = 0.0
    embed_p95: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # median ms per stage
    others_cpu_share: float = 0.0


@dataclass(slots=True)
class ScaleResult:
    chunks: int
    spliced: int  # rows made by splicing two pool texts
    write_seconds: float
    optimize_seconds: float
    writes: int
    build_peak_rss_bytes: int
    search_peak_rss_bytes: int
    index_bytes: int | None
    vector_index: str | None
    search_only: dict[str, Latency]
    end_to_end: dict[str, Latency]


@dataclass(slots=True)
class BenchReport:
    machine: dict[str, Any]
    settings: dict[str, Any]
    data: dict[str, Any]
    ingest: IngestResult | None
    scales: list[ScaleResult]
    memory_method: str
    loads: list[float]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["load_average"] = {"min": min(self.loads or [0.0]), "max": max(self.loads or [0.0])}
        del d["loads"]
        return d

    def to_markdown(self, command: str) -> str:
        return render_markdown(self, command)


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
                info = getattr(store, "index_info", None)
                vector_index = info().get("vector_index") if callable(info) else None
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


# ------------------------------------------------------------------ rendering


def mib(n: int | None) -> str:
    if n is None:
        return "n/a"
    m = n / 2**20
    return f"{m:,.0f} MiB" if m >= 100 else f"{m:.1f} MiB"


def stage_shares_text(ingest: IngestResult) -> str:
    shown = {k: v for k, v in ingest.stage_shares.items() if v >= 0.0005}
    other = max(0.0, 1.0 - sum(ingest.stage_shares.values()))
    return ", ".join(
        [*(f"{k} {100 * v:.1f} %" for k, v in shown.items()), f"other {100 * other:.1f} %"]
    )


def _memory_note(method: str) -> str:
    if method == "VmHWM":
        return (
            "peak RSS of the whole process during the phase (Linux VmHWM, reset at the "
            "phase start: includes the model, LanceDB's native memory and the page cache "
            "mapped by the process)"
        )
    return "peak RSS since the process started (ru_maxrss): an upper bound per phase"


def render_markdown(r: BenchReport, command: str) -> str:
    """The report as Markdown: setup (machine, data, settings, command), then tables."""
    m, s, d = r.machine, r.settings, r.data
    lo, hi = min(r.loads or [0.0]), max(r.loads or [0.0])
    lines = [
        "# ragline bench",
        "",
        "## Setup",
        "",
        f"- machine: `nproc` = {m['cores']}, CPU {m['cpu']}, RAM {m['ram_gib']} GiB, {m['os']}",
        f"- load average (1-min) during the run: min {lo:.2f}, max {hi:.2f} over "
        f"{len(r.loads)} samples ({m['cores']}.0 = every core busy)",
        f"- Python {m['python']}; {m['packages']}",
        f"- date: {m['date']}",
        f"- command: `{command}`",
        f"- store: {s['store']}; model {s['model']}; embed_threads {s['embed_threads']}; "
        f"chunker {s['chunker']} "
        f"(max {s['chunk_max_tokens']} tokens), write batch {s['write_batch_chunks']}; merge "
        f"{s['merge']} (k={s['rrf_k']}), candidates {s['candidates']}, threshold "
        f"{s['relevance_threshold']}, ann_min_rows {s['ann_min_rows']}, ann_nprobes "
        f"{s['ann_nprobes']}, ann_refine_factor {s.get('ann_refine_factor', 4)}; "
        f"top_k {d['top_k']}, no neighbour expansion",
        f"- synthetic chunks: {d['how']}",
        f"- queries: {d['query_source']}; {d['warmup']} warm-up per mode and path, then "
        f"{d['queries']} measured",
        "- search only = `Retriever.search` with precomputed query vectors (store + fusion); "
        "end to end = the same call embedding the query",
        f"- memory: {_memory_note(r.memory_method)}",
        "- others' CPU: the share of all cores other processes used while a block was "
        "timed (/proc/stat minus this process)",
        "",
    ]
    if r.ingest is not None:
        g = r.ingest
        lines += [
            "## Ingestion",
            "",
            "| measure | value |",
            "|---|---|",
            f"| data | {g.path}: {g.files} files ({g.failed} failed), {g.chunks:,} chunks, "
            f"{g.tokens:,} tokens |",
            f"| ingest (empty index) | **{g.chunks_per_s:.1f} chunks/s** ({g.seconds:.1f} s) |",
            f"| raw model throughput, one `embed_documents` over the same chunks | "
            f"{g.raw_chunks_per_s:.1f} chunks/s ({g.raw_seconds:.1f} s) |",
            f"| ingest as % of raw | **{100 * g.ratio_to_raw:.1f} %** |",
            f"| share of ingest time per stage | {stage_shares_text(g)} |",
            f"| peak RSS while ingesting | {mib(g.peak_rss_bytes)} |",
            f"| index size on disk | {mib(g.index_bytes)} |",
            f"| others' CPU (max of ingest, raw) | {100 * g.others_cpu_share:.0f} % |",
            "",
        ]
    lines += [
        "## Search latency (ms)",
        "",
        "| chunks | mode | search only p50 | p95 | p99 | end to end p50 | p95 | p99 "
        "| query embed p50 / p95 | others' CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in r.scales:
        for mode, only in sc.search_only.items():
            full = sc.end_to_end[mode]
            emb = f"{full.embed_p50:.1f} / {full.embed_p95:.1f}" if mode != "bm25" else "—"
            lines.append(
                f"| {sc.chunks:,} | {mode} | {only.p50:.1f} | {only.p95:.1f} | {only.p99:.1f} "
                f"| {full.p50:.1f} | {full.p95:.1f} | {full.p99:.1f} | {emb} "
                f"| {100 * only.others_cpu_share:.0f} % / {100 * full.others_cpu_share:.0f} % |"
            )
    lines += [
        "",
        "## Index build, memory and disk",
        "",
        "| chunks | spliced rows | write | optimize | vector index | peak RSS build | "
        "peak RSS search | index on disk |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sc in r.scales:
        lines.append(
            f"| {sc.chunks:,} | {sc.spliced:,} | {sc.write_seconds:.1f} s ({sc.writes} writes) "
            f"| {sc.optimize_seconds:.1f} s | {sc.vector_index or 'none (scan)'} "
            f"| {mib(sc.build_peak_rss_bytes)} | {mib(sc.search_peak_rss_bytes)} "
            f"| {mib(sc.index_bytes)} |"
        )
    lines.append("")
    return "\n".join(lines)


def rich_tables(r: BenchReport, width: int) -> list[RenderableType]:
    """The report's tables for a terminal ``width`` cells wide (turned or stacked
    where a table would not fit: figures are never cut)."""
    tables: list[RenderableType] = []
    if r.ingest is not None:
        g = r.ingest
        shown = {k: v for k, v in g.stage_shares.items() if v >= 0.0005}
        other = max(0.0, 1.0 - sum(g.stage_shares.values()))
        pairs = [
            ("chunks/s", f"{g.chunks_per_s:.1f}"),
            ("raw model chunks/s", f"{g.raw_chunks_per_s:.1f}"),
            ("% of raw", f"{100 * g.ratio_to_raw:.1f} %"),
            ("share of time", ""),
            *((f"  {k}", f"{100 * v:.1f} %") for k, v in [*shown.items(), ("other", other)]),
            ("peak RSS", mib(g.peak_rss_bytes)),
            ("index", mib(g.index_bytes)),
        ]
        title = f"ingest {g.path}: {g.files} files, {g.chunks:,} chunks"
        tables.append(pairs_table(title, pairs))
    headers = ["chunks, mode", "p50", "p95", "p99", "e2e p50", "e2e p95", "e2e p99"]
    rows = []
    for sc in r.scales:
        for mode, only in sc.search_only.items():
            full = sc.end_to_end[mode]
            rows.append(
                [
                    f"{sc.chunks:,} {mode}",
                    f"{only.p50:.1f}",
                    f"{only.p95:.1f}",
                    f"{only.p99:.1f}",
                    f"{full.p50:.1f}",
                    f"{full.p95:.1f}",
                    f"{full.p99:.1f}",
                ]
            )
    tables.append(fit_table("search latency, ms (search only | end to end)", headers, rows, width))
    headers = ["chunks", "write s", "optimize s", "vector index", "peak RSS build"]
    headers += ["peak RSS search", "on disk"]
    rows = [
        [
            f"{sc.chunks:,}",
            f"{sc.write_seconds:.1f}",
            f"{sc.optimize_seconds:.1f}",
            sc.vector_index or "none",
            mib(sc.build_peak_rss_bytes),
            mib(sc.search_peak_rss_bytes),
            mib(sc.index_bytes),
        ]
        for sc in r.scales
    ]
    title = f"index build, memory ({r.memory_method}) and disk"
    tables.append(fit_table(title, headers, rows, width))
    return tables
