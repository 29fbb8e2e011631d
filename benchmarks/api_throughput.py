r"""Throughput of ``POST /api/search`` on a real server: requests/s, latency, errors.

Starts ``ragline serve``'s app under uvicorn on 127.0.0.1 in a child process (its
in-process search indexes built before it listens, so no request meets a cold
index), then runs ``--clients`` concurrent clients (asyncio + httpx, one process)
that send distinct queries (``ragline bench``'s pseudo-queries, never repeated, so
no cache can answer) for ``--seconds`` after a warm-up. The server keeps its
defaults (query log on, ``serve_threads``, one worker process unless ``--workers``) except
the per-caller rate limit, which would refuse a benchmark by design.

    python benchmarks/api_throughput.py /tmp/prof/scale-100000 --pool-index /tmp/prof/pool

(the synthetic index and its pool as ``profile_search.py --synthetic N --work-dir
/tmp/prof`` builds them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from benchlib import emit, free_port
from machine import command_line, load_average, machine_lines
from ragline.eval.synthetic import Window, pseudo_queries
from ragline.settings import Settings


def serve(index: Path, port: int, stats_file: Path | None = None) -> None:
    """The child: build the engine and its search indexes, then serve; at exit, the
    query embeddings per model run (a coalescing embedder's count) to ``stats_file``."""
    import uvicorn

    from ragline.engine import Ragline
    from ragline.serve.app import create_app

    settings = Settings().model_copy(update={"index_dir": index})
    rag = Ragline(settings)
    t0 = time.perf_counter()
    warm_up = getattr(rag.store, "warm_up", None)
    if warm_up is not None:
        warm_up()
    print(f"search indexes built in {time.perf_counter() - t0:.1f} s", flush=True)
    if stats_file is not None and hasattr(rag.embedder, "stats"):
        coalescer = rag.embedder

        def report() -> None:  # uvicorn ends the process on SIGTERM: write as it goes
            while True:
                time.sleep(0.5)
                runs, queries = coalescer.stats
                if runs:
                    stats_file.write_text(f"{queries / runs:.2f}")

        threading.Thread(target=report, daemon=True).start()
    uvicorn.run(create_app(settings, rag=rag), host="127.0.0.1", port=port, log_level="warning")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(pid: int) -> float:
    """CPU seconds of the server process and its worker processes."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(p) for p in children.read_text().split()] if children.exists() else []
    return cpu_seconds(pid) + sum(cpu_seconds(k) for k in kids)


def queries_from(pool_index: Path, n: int) -> list[str]:
    """``n`` distinct pseudo-queries cut from the chunks of the pool index."""
    from ragline.store.factory import make_store

    settings = Settings().model_copy(update={"index_dir": pool_index})
    store = make_store(settings, 384)
    windows = [
        Window(c.title, c.chapter, c.text) for chunks, _ in store.iter_chunks(1024) for c in chunks
    ]
    store.close()
    return pseudo_queries(windows, n, 11)


async def drive(
    url: str, queries: list[str], clients: int, warmup_s: float, seconds: float
) -> tuple[list[float], int, int, float, int]:
    """(latencies of the measured requests in ms, their count, errors, wall seconds,
    requests sent in all)."""
    it = iter(queries)
    latencies: list[float] = []
    errors = 0
    measured = 0
    start = time.perf_counter()
    t_on, t_off = start + warmup_s, start + warmup_s + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors, measured
        while True:
            now = time.perf_counter()
            if now >= t_off:
                return
            q = next(it, None)
            if q is None:
                raise RuntimeError("ran out of distinct queries: raise --queries")
            t0 = time.perf_counter()
            try:
                r = await http.post(url, json={"query": q, "max_results": 10})
                ok = r.status_code == 200 and len(r.json()["hits"]) > 0
            except httpx.HTTPError:
                ok = False
            t1 = time.perf_counter()
            if t0 >= t_on and t1 <= t_off:
                measured += 1
                latencies.append((t1 - t0) * 1000.0)
                errors += not ok

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=30.0, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return latencies, measured, errors, seconds, len(queries) - sum(1 for _ in it)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", type=Path, help="the index folder to serve")
    ap.add_argument("--pool-index", type=Path, required=True, help="where queries are cut from")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--queries", type=int, default=12000, help="distinct queries available")
    ap.add_argument(
        "--workers",
        type=int,
        default=1,
        help="above 1: `ragline serve --workers N` itself (each worker builds its search "
        "indexes in the background after start: give --warmup enough seconds for that)",
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--serve-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--stats-file", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_child:
        serve(args.index, args.port, args.stats_file)
        return
    queries = queries_from(args.pool_index, args.queries)
    port = free_port()
    stats_file = Path(tempfile.mkdtemp(prefix="api-throughput-")) / "batch.txt"
    env = {**os.environ, "RAGLINE_RATE_LIMIT_PER_MINUTE": "0"}
    if args.workers > 1:
        ragline = str(Path(sys.executable).with_name("ragline"))
        cmd = [ragline, "serve", "--index", str(args.index), "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--workers", str(args.workers)]
    else:
        cmd = [sys.executable, __file__, str(args.index), "--pool-index", str(args.pool_index)]
        cmd += ["--serve-child", "--port", str(port), "--stats-file", str(stats_file)]
    child = subprocess.Popen(cmd, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 1800
        while True:
            if child.poll() is not None:
                raise SystemExit(f"the server exited with {child.returncode}")
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server was not ready in 30 minutes")
            time.sleep(0.5)
        loads = [load_average()[0]]
        cpu0 = server_cpu(child.pid), time.process_time()
        lat, n, errors, wall, total = asyncio.run(
            drive(f"{base}/api/search", queries, args.clients, args.warmup, args.seconds)
        )
        cpu1 = server_cpu(child.pid), time.process_time()
        loads.append(load_average()[0])
    finally:
        child.terminate()
        child.wait(timeout=60)
    a = np.asarray(lat)
    batch = stats_file.read_text() if stats_file.exists() else "n/a (no coalescing)"
    lines = [
        "# `/api/search` throughput",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {args.index}; {args.clients} concurrent clients (asyncio + httpx, one "
        f"process on the same machine), distinct queries, hybrid, max_results 10; "
        f"{args.warmup:.0f} s warm-up then {wall:.0f} s measured; uvicorn workers "
        f"{args.workers}; rate limit off, everything else the server's defaults",
        "",
        f"- CPU per request, over all {total} sent (warm-up included): server "
        f"{1e3 * (cpu1[0] - cpu0[0]) / total:.1f} ms, "
        f"clients {1e3 * (cpu1[1] - cpu0[1]) / total:.1f} ms; query embeddings per model "
        f"run in the server: {batch}",
        "",
        "| requests | req/s | p50 ms | p95 ms | p99 ms | errors |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {n} | {n / wall:.1f} | {np.percentile(a, 50):.1f} | {np.percentile(a, 95):.1f} | "
        f"{np.percentile(a, 99):.1f} | {errors} |",
        "",
    ]
    text = "\n".join(lines)
    emit(text, args.out)


if __name__ == "__main__":
    main()
