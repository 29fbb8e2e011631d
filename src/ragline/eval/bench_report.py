"""`ragline bench`'s results and how they are shown: the report's records, Markdown, tables.

:mod:`ragline.eval.bench` measures and fills these in; keeping them apart lets the
report be rendered (and tested) without running a benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import RenderableType

from ragline.retrieve.retriever import SearchMode
from ragline.tables import fit_table, pairs_table


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
