"""PostgreSQL BM25: the numpy and the MaxScore-pruned scorers next to the exhaustive one.

The corpus is benchmarks/postgres_search.py's (distinct 60-word windows of SciFact
abstracts and d2l-en prose, documents of 20 chunks, one tenant); BM25 needs no
real vectors, so rows carry random ones. Queries: SciFact *train* claims (ids in
qrels/train.tsv). Every query is run by the three scorers back to back, in
rotating order, at each k; the table gives each scorer's percentiles and the
per-query ratio exhaustive/scorer, and every result is compared with the
exhaustive one for identity (ids, order and float scores). ``--keep DIR``
reuses (or leaves) the server and its index, e.g. one written by
postgres_search.py ``--keep`` (schema ``bench_<rows>``). The machine is shared:
the load average is sampled throughout and reported, and only the paired ratios
are meant for comparison.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from benchlib import pct
from machine import command_line, load_average, machine_lines
from postgres_search import kept_server, start_server, stored_rows
from ragline.embed.base import ModelFingerprint
from ragline.eval.synthetic import (
    BuildStats,
    Synthetic,
    beir_windows,
    build_index,
    distinct_shuffled,
    markdown_windows,
)
from ragline.store.postgres import PostgresStore
from ragline.store.reads import keyword_candidates
from search_scale import TENANT

DATA = Path("/work/shared/data")
DIM = 16


def train_claims(scifact: Path, n: int) -> list[str]:
    with (scifact / "qrels" / "train.tsv").open(encoding="utf-8") as f:
        ids = {line.split("\t")[0] for line in f if line[:1].isdigit()}
    with (scifact / "queries.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [r["text"] for r in rows if str(r["_id"]) in ids][:n]


def timed(store: PostgresStore, query: str, k: int) -> tuple[float, list[tuple[str, float]]]:
    t0 = time.perf_counter()
    out = keyword_candidates(store, query, k)
    return (time.perf_counter() - t0) * 1000, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--ks", default="10,100", help="top-k values, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--probe", type=int, default=2000, help="postings the threshold probe reads")
    ap.add_argument("--keep", type=Path, default=None, help="a kept server folder (reused)")
    ap.add_argument("--schema", default="bench_bm25", help="index schema (reused when full)")
    ap.add_argument(
        "--reuse", action="store_true", help="measure a kept schema whatever its row count"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    pool = beir_windows(args.data / "scifact" / "corpus.jsonl", 60, 30)
    pool += markdown_windows(args.data / "d2l-en", 60, 30)
    pool = distinct_shuffled(pool, args.seed)
    rng = np.random.default_rng(args.seed)
    real = rng.standard_normal((64, DIM)).astype(np.float32)
    real /= np.linalg.norm(real, axis=1, keepdims=True)
    data = Synthetic(pool, real, 0.03, args.seed)
    claims = train_claims(args.data / "scifact", args.warmup + args.queries)
    warm, queries = claims[: args.warmup], claims[args.warmup :]
    ks = [int(k) for k in args.ks.split(",")]

    server = kept_server(args.keep) if args.keep else start_server()
    loads = [load_average()[0]]
    try:
        url = server.url()
        fp = ModelFingerprint(name="random", dimension=DIM, digest="0" * 64)
        schema = args.schema
        with (
            PostgresStore(
                url,
                dimension=DIM,
                schema=schema,
                bm25_scorer="sql",
                bm25_probe_postings=args.probe,
                ann_min_rows=10**12,  # BM25 only: optimize() builds no HNSW graph
            ) as pruned,
            PostgresStore(
                url, dimension=DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
            ) as exact,
            PostgresStore(url, dimension=DIM, schema=schema) as client,
        ):
            held = stored_rows(server, schema) if args.keep else 0
            if held and (args.reuse or held == args.rows):
                args.rows = held
                t0 = time.perf_counter()  # migrations ran at open; pack the postings
                pruned.optimize()
                build = BuildStats(args.rows, 0, float("nan"), time.perf_counter() - t0)
            else:
                build = build_index(pruned, data, args.rows, 2000, fp, TENANT)
            loads.append(load_average()[0])
            print(f"built {args.rows} rows: {build.write_seconds:.0f} s", file=sys.stderr)
            scorers = {"exhaustive": exact, "pruned": pruned, "numpy": client}
            for q in warm:
                for k in ks:
                    for st in scorers.values():
                        keyword_candidates(st, q, k)
            lines = []
            for k in ks:
                ms: dict[str, list[float]] = {name: [] for name in scorers}
                same = dict.fromkeys(scorers, 0)
                for i, q in enumerate(queries):
                    names = list(scorers)[i % 3 :] + list(scorers)[: i % 3]  # rotated order
                    got = {}
                    for name in names:
                        t, got[name] = timed(scorers[name], q, k)
                        ms[name].append(t)
                    for name in scorers:
                        same[name] += got[name] == got["exhaustive"]
                    if i % 50 == 0:
                        loads.append(load_average()[0])
                for name in ("pruned", "numpy"):
                    ratios = [a / b for a, b in zip(ms["exhaustive"], ms[name], strict=True)]
                    lines.append(
                        f"| {name} | {k} | {len(queries)} | {pct(ms['exhaustive'], 50):.1f} | "
                        f"{pct(ms['exhaustive'], 95):.1f} | {pct(ms[name], 50):.1f} | "
                        f"{pct(ms[name], 95):.1f} | {statistics.median(ratios):.2f} | "
                        f"{float(np.exp(np.mean(np.log(ratios)))):.2f} | "
                        f"{same[name]}/{len(queries)} |"
                    )
                    print(lines[-1], file=sys.stderr, flush=True)
    finally:
        if args.keep:
            server.stop("fast")
        else:
            server.destroy()
    print(f"- command: `{command_line()}`")
    print(*machine_lines(loads), sep="\n")
    print(
        f"- corpus: {args.rows:,} chunks written in {build.write_seconds:.0f} s, "
        f"optimize {build.optimize_seconds:.0f} s (nan: reused)"
    )
    print()
    print(
        "| scorer | k | queries | exhaustive p50 ms | exhaustive p95 ms | scorer p50 ms "
        "| scorer p95 ms | median ratio | geo-mean ratio | identical top-k |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(*lines, sep="\n")


if __name__ == "__main__":
    main()
