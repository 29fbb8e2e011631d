"""Search latency of the embedded engine at 10k and 100k chunks.

DESIGN.md's goals: hybrid top-10 p95 < 15 ms at 100k chunks on 2 cores without
the query embedding, < 40 ms with it. This script builds synthetic indexes from
real text, runs SciFact claims through ``Retriever.search`` in every mode, and
profiles where a hybrid search spends its time.

The corpus (embedding 100k passages on 2 cores would take an hour) is made by
:mod:`ragline.eval.synthetic` (the generator ``ragline bench`` uses too):

* pool: sliding windows of ``--window`` words (stride ``--stride``) over the
  SciFact abstracts and the prose paragraphs of d2l-en (code fences dropped),
  every distinct window once, in random order; the first ``--embed`` carry their
  real all-MiniLM-L6-v2 (int8 ONNX) embedding;
* rows: row i < pool size is pool window i; every further row splices the first
  half of a random window's words with the second half of another's; every row
  without its own embedding carries the real vector of a random embedded window
  plus Gaussian noise (σ = ``--sigma`` per component), re-normalised. Only the
  embedded rows pair text and vector, so the vector and keyword candidate lists
  overlap less than on a real corpus: a pessimistic case for fusion;
* rows are grouped into documents of 20 chunks and written with
  ``replace_documents`` in batches, then ``optimize()``; the 10k index is the
  first 10k rows of the same row sequence.

Latency, per mode (hybrid = RRF, vector, bm25), top_k 10, default settings:
end to end (``Retriever.search`` with the real embedder, no query cache:
``embed`` is its own ``timings_ms`` stage) and search only (the same Retriever
with an embedder that returns precomputed query vectors, so ``total`` is all
store + fusion work).

Run: python benchmarks/search_scale.py [--scales 10000,100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.background_loop import LOOP
from lancedb.query import FullTextOperator, MultiMatchQuery

from benchlib import emit, pct
from machine import Phase, command_line, load_average, machine_lines, wait_for_quiet
from ragline.embed.base import Vectors
from ragline.embed.onnx import OnnxEmbedder
from ragline.eval.synthetic import (
    DOC_CHUNKS,
    PrecomputedEmbedder,
    Synthetic,
    Window,
    beir_windows,
    build_index,
    distinct_shuffled,
    embed_texts,
    markdown_windows,
    row_id,
)
from ragline.retrieve.retriever import Retriever
from ragline.settings import Settings
from ragline.store.arrow import arrow_to_chunks
from ragline.store.base import CHUNK_COLUMNS
from ragline.store.factory import make_store
from ragline.store.lance import LanceStore
from ragline.store.lance_search import sanitize_fts_query
from ragline.store.reads import vector_search, vectors_for

REPO = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data")
DEFAULT_OUT = REPO / "benchmarks" / "results" / "search.md"
MODES = ("hybrid", "vector", "bm25")
TENANT = "default"


# -------------------------------------------------------------------- latency


@dataclass(slots=True)
class Latency:
    total: list[float]
    embed: list[float]
    stages: dict[str, float]  # median ms per stage
    load: float
    others: float  # share of the cores other processes used while measuring

    def row(self) -> str:
        t = self.total
        return f"{pct(t, 50):.1f} | {pct(t, 95):.1f} | {pct(t, 99):.1f}"


def measure(
    retriever: Retriever, warm: Sequence[str], queries: Sequence[str], mode: str
) -> Latency:
    """``timings_ms`` of one ``search`` per query, after the unmeasured ``warm`` ones."""
    for q in warm:
        retriever.search(q, mode=mode, top_k=10)  # type: ignore[arg-type]
    with Phase() as phase:
        runs = [retriever.search(q, mode=mode, top_k=10).timings_ms for q in queries]  # type: ignore[arg-type]
    keys = [k for k in runs[0] if k != "total"]
    return Latency(
        total=[r["total"] for r in runs],
        embed=[r["embed"] for r in runs],
        stages={k: statistics.median(r[k] for r in runs) for k in keys},
        load=load_average()[0],
        others=phase.others_share,
    )


def exact_recall(store: LanceStore, qvecs: Vectors, vectors: Vectors) -> float:
    """recall@10 of ``vector_search`` against a brute-force numpy top-10 of ``vectors``."""
    exact = np.argsort(-(qvecs @ vectors.T), axis=1)[:, :10]
    hits = 0
    for i, q in enumerate(qvecs):
        got = {h.chunk.id for h in vector_search(store, q, 10, {"tenant": TENANT})}
        hits += len(got & {row_id(int(j), TENANT) for j in exact[i]})
    return hits / (10 * len(qvecs))


# ---------------------------------------------------------------- profiling


def run_async(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a LanceDB coroutine on its background loop, as the store does."""
    return LOOP.run(coro)  # type: ignore[no-untyped-call]


def timed(fn: Callable[[], object], n: int) -> tuple[float, float]:
    """(p50, p95) milliseconds of ``n`` calls."""
    fn()
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1000.0)
    return pct(ms, 50), pct(ms, 95)


def experiments(
    store: LanceStore, queries: Sequence[str], qvecs: Vectors, depth: int
) -> list[tuple[str, float, float]]:
    """Variants of the two store queries a hybrid search makes, each over the queries:
    which parts cost what (columns fetched, tenant pre-filter, depth, round trips,
    the read-consistency check). Built on the store's own table handle."""
    live = store._table()  # the live AsyncTable (benchmark only)
    # The same table through a connection that does not check for a newer version per read.
    lax = run_async(_open_lax(store.path, store._chunks_name))
    plan = store._meta.vector_index
    where = f"tenant = '{TENANT}'"
    n = len(queries)
    counter = iter(range(10**9))
    full = [*CHUNK_COLUMNS]

    def vq(i: int, cols: list[str], k: int, pred: str | None, table: Any = live) -> Any:
        s = table.query().nearest_to(qvecs[i]).column("vector").distance_type("cosine")
        s = s.select(cols).limit(k)
        if plan is not None and plan.kind == "ann":
            s = s.nprobes(store.ann_nprobes).refine_factor(store.ann_refine_factor)
        elif plan is not None:
            s = s.nprobes(max(plan.partitions, store.ann_nprobes))
        return s.where(pred) if pred else s

    def kq(i: int, cols: list[str], k: int, pred: str | None, fields: int = 3) -> Any:
        names = ["title", "headings", "text"][3 - fields :]
        boosts = [2.0, 1.5, 1.0][3 - fields :]
        text = sanitize_fts_query(queries[i])
        fts = MultiMatchQuery(text, names, boosts=boosts, operator=FullTextOperator.OR)
        s = live.query().nearest_to_text(fts).select(cols).limit(k)
        return s.where(pred) if pred else s

    def one(build: Callable[[int], Any]) -> Callable[[], object]:
        return lambda: run_async(build(next(counter) % n).to_arrow())

    def both_sequential() -> object:
        i = next(counter) % n
        run_async(vq(i, [*full, "_distance"], depth, where).to_arrow())
        return run_async(kq(i, [*full, "_score"], depth, where).to_arrow())

    def both_concurrent() -> object:
        i = next(counter) % n
        v = vq(i, [*full, "_distance"], depth, where).to_arrow()
        k = kq(i, [*full, "_score"], depth, where).to_arrow()
        return run_async(_gather(v, k))

    rows: pa.Table = run_async(vq(0, [*full, "_distance"], depth, where).to_arrow())
    ids = [h.chunk.id for h in vector_search(store, qvecs[0], 10, {"tenant": TENANT})]
    d = depth
    vcols, kcols = [*full, "_distance"], [*full, "_score"]
    cases: list[tuple[str, Callable[[], object]]] = [
        (
            f"vector: as the store runs it (k={d}, all columns, tenant filter)",
            one(lambda i: vq(i, vcols, d, where)),
        ),
        (
            "vector: same, connection without the per-read version check",
            one(lambda i: vq(i, vcols, d, where, lax)),
        ),
        (f"vector: k={d}, all columns, no filter", one(lambda i: vq(i, vcols, d, None))),
        (
            f"vector: k={d}, id + distance only, tenant filter",
            one(lambda i: vq(i, ["id", "_distance"], d, where)),
        ),
        ("vector: k=10, all columns, tenant filter", one(lambda i: vq(i, vcols, 10, where))),
        (
            f"bm25: as the store runs it (k={d}, 3 fields, all columns, tenant filter)",
            one(lambda i: kq(i, kcols, d, where)),
        ),
        (f"bm25: k={d}, all columns, no filter", one(lambda i: kq(i, kcols, d, None))),
        (
            f"bm25: k={d}, id + score only, tenant filter",
            one(lambda i: kq(i, ["id", "_score"], d, where)),
        ),
        ("bm25: k=10, all columns, tenant filter", one(lambda i: kq(i, kcols, 10, where))),
        (
            f"bm25: k={d}, `text` field only, all columns, tenant filter",
            one(lambda i: kq(i, kcols, d, where, fields=1)),
        ),
        (
            f"bm25: k={d}, all columns + `vector`, tenant filter",
            one(lambda i: kq(i, [*kcols, "vector"], d, where)),
        ),
        ("vector then bm25, two loop round trips (as `Retriever` does)", both_sequential),
        ("vector and bm25 concurrently, one `asyncio.gather` round trip", both_concurrent),
        ("vectors_for(store, 10 ids) (fusion's cosine lookup)", lambda: vectors_for(store, ids)),
        ("table.count_rows() (one near-empty round trip)", lambda: run_async(live.count_rows())),
        (f"python: arrow_to_chunks of {rows.num_rows} rows", lambda: arrow_to_chunks(rows)),
    ]
    return [(name, *timed(fn, n)) for name, fn in cases]


async def _open_lax(path: Path, name: str) -> Any:
    db = await lancedb.connect_async(path)
    return await db.open_table(name)


async def _gather(*aws: Awaitable[Any]) -> list[Any]:
    return list(await asyncio.gather(*aws))


def profile(retriever: Retriever, queries: Sequence[str], mode: str) -> str:
    """cProfile of ``search`` over the queries: the heaviest functions by own time."""
    prof = cProfile.Profile()
    prof.enable()
    for q in queries:
        retriever.search(q, mode=mode, top_k=10)  # type: ignore[arg-type]
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(14)
    text = buf.getvalue()
    start = text.find("   ncalls")
    return text[start:].rstrip() if start >= 0 else text.rstrip()


# ---------------------------------------------------------------------- main


def kept_findings(out: Path) -> str:
    """The hand-written "## Findings" section of a previous result file, kept on rewrite."""
    if not out.is_file():
        return ""
    old = out.read_text(encoding="utf-8")
    at = old.find("\n## Findings")
    return old[at:] if at >= 0 else ""


def load_queries(path: Path, n: int) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:n]


@dataclass(slots=True)
class Corpus:
    """The synthetic corpus and timed queries of a scale run (see :func:`synthetic_corpus`)."""

    pool: list[Window]
    n_sci: int  # windows from SciFact (the first ones before shuffling)
    warm: list[str]
    queries: list[str]
    data: Synthetic
    precomputed: PrecomputedEmbedder
    qvecs: np.ndarray
    embed_seconds: float


def synthetic_corpus(
    args: argparse.Namespace,
    embedder: OnnxEmbedder,
    settle: Callable[[list[Window]], None] = lambda pool: None,
) -> Corpus:
    """Windows of SciFact abstracts and d2l-en prose (distinct, shuffled), the first
    ``--embed`` of them embedded for real (timed, after ``settle(pool)``), and the
    SciFact queries with their vectors; the options are :func:`corpus_args`'s."""
    pool = beir_windows(args.data / "scifact" / "corpus.jsonl", args.window, args.stride)
    n_sci = len(pool)
    pool += markdown_windows(args.data / "d2l-en", args.window, args.stride)
    pool = distinct_shuffled(pool, args.seed)
    all_queries = load_queries(args.data / "scifact" / "queries.jsonl", args.warmup + args.queries)
    warm, queries = all_queries[: args.warmup], all_queries[args.warmup :]
    settle(pool)
    t0 = time.perf_counter()
    real = embedder.embed_documents(embed_texts(pool[: args.embed], TENANT))
    embed_seconds = time.perf_counter() - t0
    data = Synthetic(pool, real, args.sigma, args.seed)
    precomputed = PrecomputedEmbedder(embedder, all_queries)
    qvecs = np.stack([precomputed.embed_query(q) for q in queries])
    return Corpus(pool, n_sci, warm, queries, data, precomputed, qvecs, embed_seconds)


def corpus_args(ap: argparse.ArgumentParser, out: Path, scales: str, max_wait: float) -> None:
    """The options of the synthetic corpus and the timed queries, shared with
    benchmarks/postgres_search.py."""
    ap.add_argument("--data", type=Path, default=DATA, help="folder with scifact/ and d2l-en/")
    ap.add_argument("--out", type=Path, default=out, help="Markdown result file")
    ap.add_argument("--scales", default=scales, help="index sizes, comma-separated")
    ap.add_argument("--queries", type=int, default=200, help="measured SciFact queries")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured queries per mode")
    ap.add_argument("--embed", type=int, default=8000, help="rows with a real embedding")
    ap.add_argument("--window", type=int, default=60, help="words per text window")
    ap.add_argument("--stride", type=int, default=30, help="words between window starts")
    ap.add_argument("--sigma", type=float, default=0.03, help="noise per vector component")
    ap.add_argument("--batch", type=int, default=2000, help="chunks per replace_documents")
    ap.add_argument("--threads", type=int, default=2, help="ONNX batches run side by side")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-load", type=float, default=2.5, help="wait while 1-min load is above")
    ap.add_argument("--max-wait", type=float, default=max_wait, help="longest wait (s) for quiet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_args(ap, DEFAULT_OUT, "10000,100000", 1200.0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the temp folder
    scales = sorted(int(s) for s in args.scales.split(","))
    settings = Settings(embed_threads=args.threads)

    embedder = OnnxEmbedder(threads=args.threads)
    loads: list[float] = []

    def settle(pool: list[Window]) -> None:
        embedder.embed_documents([w.text for w in pool[:64]])  # warm-up
        loads.append(wait_for_quiet(args.max_load, args.max_wait))

    corpus = synthetic_corpus(args, embedder, settle)
    pool, n_sci, warm, queries = corpus.pool, corpus.n_sci, corpus.warm, corpus.queries
    data, precomputed, qvecs = corpus.data, corpus.precomputed, corpus.qvecs
    embed_seconds = corpus.embed_seconds

    sections: list[str] = []
    summary: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ragline-bench-search-") as tmp:
        for rows in scales:
            s = settings.model_copy(update={"index_dir": Path(tmp) / f"index-{rows}"})
            store = make_store(s, embedder.dimension)
            assert isinstance(store, LanceStore)
            refine = store.ann_refine_factor
            build = build_index(store, data, rows, args.batch, embedder.fingerprint, TENANT)
            print(
                f"{rows}: built in {build.write_seconds:.1f} + {build.optimize_seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            e2e = Retriever(store, embedder, s)
            fast = Retriever(store, precomputed, s)
            res: dict[str, tuple[Latency, Latency]] = {}
            for mode in MODES:
                loads.append(wait_for_quiet(args.max_load, args.max_wait))
                only = measure(fast, warm, queries, mode)
                full = measure(e2e, warm, queries, mode)
                loads += [only.load, full.load]
                res[mode] = (only, full)
                print(
                    f"{rows} {mode}: search-only p95 {pct(only.total, 95):.1f} ms, "
                    f"end-to-end p95 {pct(full.total, 95):.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
            recall = exact_recall(store, qvecs, data.vectors(0, rows))
            info = store.index_info()
            sections += [
                f"### {rows:,} chunks",
                "",
                f"Index: written in {build.write_seconds:.1f} s "
                f"({build.writes} `replace_documents` calls), `optimize()` "
                f"{build.optimize_seconds:.1f} s; vector index `{info['vector_index']}` "
                f"({info['vector_search']} search); vector recall@10 vs brute force "
                f"{recall:.3f}.",
                "",
                "| mode | search only p50 | p95 | p99 | end to end p50 | p95 | p99 "
                "| query embed p50 / p95 | others' CPU (search only / end to end) |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for mode in MODES:
                only, full = res[mode]
                emb = (
                    f"{pct(full.embed, 50):.1f} / {pct(full.embed, 95):.1f}"
                    if mode != "bm25"
                    else "— (not embedded)"
                )
                sections.append(
                    f"| {mode} | {only.row()} | {full.row()} | {emb} "
                    f"| {100 * only.others:.0f} % / {100 * full.others:.0f} % |"
                )
            stage_keys = [k for k in res["hybrid"][0].stages if k != "embed"]
            sections += [
                "",
                "Median ms per stage, search only: "
                + "; ".join(
                    f"{mode}: "
                    + ", ".join(
                        f"{k} {res[mode][0].stages[k]:.2f}"
                        for k in stage_keys
                        if res[mode][0].stages[k] > 0
                    )
                    for mode in MODES
                ),
                "",
            ]
            h_only, h_full = res["hybrid"]
            summary.append(
                f"| {rows:,} | {pct(h_only.total, 95):.1f} ms | {pct(h_full.total, 95):.1f} ms |"
            )
            if rows == scales[-1]:
                loads.append(wait_for_quiet(args.max_load, args.max_wait))
                exp = experiments(store, queries, qvecs, s.candidates)
                prof = profile(fast, queries, "hybrid")
                loads.append(load_average()[0])
            store.close()

    lines = [
        "# Search latency at scale",
        "",
        "Produced by `benchmarks/search_scale.py`. Goals (DESIGN.md): hybrid top-10 "
        "p95 < 15 ms at 100k chunks on 2 cores excluding the query embedding, < 40 ms "
        "including it.",
        "",
        "## Setup",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- texts: {len(pool):,} windows of {args.window} words every {args.stride} words "
        f"({n_sci:,} from SciFact abstracts in {args.data / 'scifact' / 'corpus.jsonl'}, "
        f"{len(pool) - n_sci:,} from d2l-en prose, distinct, seeded random order); rows "
        f"beyond them ({data.spliced(scales[-1]):,} at {scales[-1]:,}) splice the first half "
        "of one window with the second half of another (`ragline.eval.synthetic`)",
        f"- vectors: {data.embedded:,} rows carry the real embedding of their text "
        f"(all-MiniLM-L6-v2 int8 ONNX, {embed_seconds:.0f} s to embed); the others the "
        f"vector of a random one of those + N(0, {args.sigma}²) per component, "
        f"re-normalised (mean cosine to the source {data.noisy_cosine:.3f}); text and vector "
        "match only on the embedded rows (pessimistic for fusion, see the docstring)",
        f"- documents of {DOC_CHUNKS} chunks, written with `LanceStore.replace_documents` in "
        f"batches of {args.batch} chunks, then `optimize()`; all rows tenant `{TENANT}`",
        f"- queries: SciFact claims from queries.jsonl, {args.warmup} warm-up (per mode and "
        f"path), then {len(queries)} measured, each once; top_k 10",
        f"- settings: defaults — merge `{settings.hybrid_merge_method}` (k={settings.rrf_k}), "
        f"candidates {settings.candidates} per retriever, boosts title "
        f"{settings.boost_title} / headings {settings.boost_headings} / text "
        f"{settings.boost_text}, threshold {settings.relevance_threshold}, ann_min_rows "
        f"{settings.ann_min_rows}, ann_nprobes {settings.ann_nprobes}, refine factor "
        f"{refine}; no query cache",
        f"- threads: `embed_threads` = {args.threads} (ONNX batches side by side, each "
        "single-threaded); LanceDB's own "
        "thread pool (not pinned)",
        "- search only = `Retriever.search` with an embedder returning precomputed query "
        "vectors (`total` of `timings_ms`, no model run); end to end = the same call with "
        "the real embedder (its `embed` stage reported separately)",
        "- others' CPU: the share of the cores that other processes used while a block "
        "was measured (/proc/stat minus this process): the interference a figure suffered",
        "",
        "## Summary (hybrid, top-10)",
        "",
        "| chunks | p95 search only (goal < 15 ms) | p95 incl. query embedding (goal < 40 ms) |",
        "|---|---|---|",
        *summary,
        "",
        "## Latency (ms)",
        "",
        *sections,
        "## Where the time goes (largest index)",
        "",
        "Store query variants, each over the measured queries (ms):",
        "",
        "| variant | p50 | p95 |",
        "|---|---|---|",
        *[f"| {name} | {p50:.2f} | {p95:.2f} |" for name, p50, p95 in exp],
        "",
        "cProfile of hybrid search-only over the measured queries (by own time; the lock "
        "waits are the main thread waiting for LanceDB's Rust work on its event loop):",
        "",
        "```",
        prof,
        "```",
        "",
    ]
    text = "\n".join(lines) + kept_findings(args.out)
    emit(text, args.out)


if __name__ == "__main__":
    main()
