"""CPU milliseconds per PostgreSQL search call, client and server backend summed.

On a shared, overloaded machine wall-clock latency measures the queue for the
cores more than the work; the CPU time a search consumes (this process's, plus
its server backend's from /proc/<pid>/stat) is the latency it would have on
an idle machine with the data in memory, give or take cache effects. Clock
ticks are 10 ms, so only the mean over many calls is reported.

Run from benchmarks/ against a server kept by postgres_search.py ``--keep``:
python postgres_cpu.py --keep /tmp/pg100k --schema bench_100000
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from machine import command_line, load_average, machine_lines
from postgres_bm25 import DATA, train_claims
from postgres_search import kept_server
from ragline.store.postgres import PostgresStore
from ragline.store.reads import keyword_candidates

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def backend_ms(pid: int) -> float:
    """User + system CPU of a server process so far, in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


def own_ms() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1000


def backend_pid(store: PostgresStore) -> int:
    def read(conn: Any) -> int:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        return int(row[0])

    return store._run(read, "backend pid", read=True)


def cpu_per_call(
    store: PostgresStore, calls: list[Callable[[], object]]
) -> tuple[float, float, float]:
    """Mean client ms, server ms and wall ms per call (one connection: pool size 1)."""
    pid = backend_pid(store)
    c0, s0, w0 = own_ms(), backend_ms(pid), time.perf_counter()
    for call in calls:
        call()
    n = len(calls)
    return (
        (own_ms() - c0) / n,
        (backend_ms(pid) - s0) / n,
        (time.perf_counter() - w0) * 1000 / n,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, required=True)
    ap.add_argument("--schema", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--no-vector", action="store_true", help="skip vector search (no HNSW)")
    ap.add_argument(
        "--optimize", action="store_true", help="optimize() first (packs the postings if due)"
    )
    ap.add_argument("--no-sql", action="store_true", help="skip the SQL scorers")
    ap.add_argument("--rounds", type=int, default=1, help="measure every scorer this often")
    args = ap.parse_args()
    claims = train_claims(DATA / "scifact", 20 + args.queries)[20:]
    server = kept_server(args.keep)
    loads = [load_average()[0]]
    rows = []
    try:
        common: dict[str, Any] = {"dimension": 384, "schema": args.schema, "pool_size": 1}
        stores = {
            "bm25 numpy": PostgresStore(server.url(), **common),
            "bm25 numpy exhaustive": PostgresStore(server.url(), bm25_prune=False, **common),
            "bm25 sql exhaustive": PostgresStore(
                server.url(), bm25_scorer="sql", bm25_prune=False, **common
            ),
            "bm25 sql pruned": PostgresStore(server.url(), bm25_scorer="sql", **common),
        }
        if args.no_sql:
            for name in ("bm25 sql exhaustive", "bm25 sql pruned"):
                stores.pop(name).close()
        if args.optimize:
            t0 = time.perf_counter()
            stores["bm25 numpy"].optimize()
            print(f"optimize: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        rng = np.random.default_rng(0)
        dim = stores["bm25 numpy"].dimension
        qv = rng.standard_normal((len(claims), dim)).astype(np.float32)
        for r in range(args.rounds):
            for name, st in stores.items():
                for q in claims[:10]:
                    keyword_candidates(st, q, args.k)
                calls: list[Callable[[], object]] = [
                    partial(st.keyword_candidates, q, args.k) for q in claims
                ]
                label = f"{name} (round {r + 1})" if args.rounds > 1 else name
                rows.append((label, *cpu_per_call(st, calls)))
                loads.append(load_average()[0])
        st = stores["bm25 numpy"]
        if not args.no_vector:
            calls = [partial(st.vector_candidates, v, args.k) for v in qv]
            rows.append(("vector (HNSW)", *cpu_per_call(st, calls)))
            loads.append(load_average()[0])
        for st in stores.values():
            st.close()
    finally:
        server.stop("fast")
    print(f"- command: `{command_line()}`")
    print(*machine_lines(loads), sep="\n")
    print(f"- {len(claims)} SciFact train claims, k = {args.k}, schema {args.schema}")
    print()
    print("| call | client CPU ms | server CPU ms | CPU ms total | wall ms (loaded) |")
    print("|---|---|---|---|---|")
    for name, c, s, w in rows:
        print(f"| {name} | {c:.1f} | {s:.1f} | {c + s:.1f} | {w:.1f} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
