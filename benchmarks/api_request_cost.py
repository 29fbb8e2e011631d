r"""Where one ``POST /api/search``'s CPU goes: serve layer, query embedding, search.

In process (the app over ASGI, no socket, one request at a time after a warm-up),
over the same distinct queries: process CPU per request for

* the whole request (middleware, dependencies, worker-thread hops, validation, the
  engine's search, the query-log row, the response);
* the engine's search alone (``Ragline.search``: embedding, language, candidates,
  fusion, rows);
* the query embedding alone and the query's language detection alone;

so the serve layer's own cost is the first minus the second; and the whole request
again with ``--concurrency`` requests in flight at once (as concurrent clients send
them), where concurrent query embeddings share model runs. The steps rotate round by
round, so load drift on a shared machine hits them alike. CPU time rather than
wall time, so other load on a shared machine inflates it less (it still does: caches
and frequency are shared). Run it on two source trees to compare them:

    PYTHONPATH=src python benchmarks/api_request_cost.py /tmp/prof/scale-100000 \
        --pool-index /tmp/prof/pool
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from api_throughput import queries_from
from benchlib import emit
from machine import command_line, load_average, machine_lines
from ragline.engine import Ragline
from ragline.serve.app import create_app
from ragline.settings import Settings
from ragline.text.language import detect_language


def cpu_ms(fn: Callable[[str], object], queries: list[str]) -> float:
    t0 = time.process_time()
    for q in queries:
        fn(q)
    return (time.process_time() - t0) / len(queries) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", type=Path)
    ap.add_argument("--pool-index", type=Path, required=True, help="where queries are cut from")
    ap.add_argument("--queries", type=int, default=400, help="per step and round")
    ap.add_argument("--rounds", type=int, default=3, help="steps rotate round by round")
    ap.add_argument("--concurrency", type=int, default=8, help="requests at once, last step")
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    settings = Settings().model_copy(update={"index_dir": args.index, "rate_limit_per_minute": 0})
    rag = Ragline(settings)
    rag.store.warm_up()  # type: ignore[attr-defined]
    app = create_app(settings, rag=rag)
    n, w, c = args.queries, args.warmup, args.concurrency
    steps = [
        "whole request",
        "engine search (embedding included)",
        "  of which query embedding",
        "  of which language detection (fastText)",
        f"whole request, {c} at once",
    ]
    qs = queries_from(args.pool_index, w + len(steps) * args.rounds * n)
    fresh = iter(qs[w:])  # every query new to every step and round
    loads = [load_average()[0]]
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    coalesced = hasattr(rag.embedder, "stats")  # a CoalescingEmbedder counts its runs
    batched = [0, 0]  # (runs, queries) of the coalescing embedder in the concurrent step

    async def requests() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:

                async def post(q: str) -> None:
                    r = await http.post("/api/search", json={"query": q, "max_results": 10})
                    r.raise_for_status()

                for q in qs[:w]:
                    await post(q)
                for r in range(args.rounds):
                    for step in steps[r % len(steps) :] + steps[: r % len(steps)]:
                        batch = [next(fresh) for _ in range(n)]
                        t0 = time.process_time()
                        if step == steps[0]:
                            for q in batch:
                                await post(q)
                        elif step == steps[4]:
                            before = rag.embedder.stats if coalesced else (0, 0)  # type: ignore[attr-defined]
                            for i in range(0, n, c):
                                await asyncio.gather(*(post(q) for q in batch[i : i + c]))
                            if coalesced:
                                after = rag.embedder.stats  # type: ignore[attr-defined]
                                batched[0] += after[0] - before[0]
                                batched[1] += after[1] - before[1]
                        elif step == steps[1]:
                            cpu_ms(lambda q: rag.search(q, mode="hybrid", top_k=10), batch)
                        elif step == steps[2]:
                            cpu_ms(rag.embedder.embed_query, batch)
                        else:
                            cpu_ms(lambda q: detect_language.__wrapped__(q), batch)
                        cpu[step].append((time.process_time() - t0) / n * 1000.0)

    asyncio.run(requests())
    out = {k: float(np.median(v)) for k, v in cpu.items()}
    serve = out[steps[0]] - out[steps[1]]
    loads.append(load_average()[0])
    mean_batch = f"{batched[1] / batched[0]:.1f}" if batched[0] else "n/a (no coalescing)"
    lines = [
        f"## `/api/search` CPU per request: {args.label}",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {args.index}; {n} distinct queries per step and round after {w} warm-ups, "
        f"in process over ASGI (no socket), one request at a time except the last step "
        f"({c} at once, as {c} clients send them); rate limit off; {args.rounds} rounds, "
        "the steps' order rotated each round; the median over rounds",
        f"- query embeddings per model run in the concurrent step: {mean_batch}",
        "",
        "| part | CPU ms per request |",
        "|---|---:|",
        *(f"| {k} | {out[k]:.2f} |" for k in steps[:4]),
        f"| serve layer (whole request − engine search) | {serve:.2f} |",
        f"| {steps[4]} | {out[steps[4]]:.2f} |",
        "",
    ]
    text = "\n".join(lines)
    emit(text, args.out, append=True)


if __name__ == "__main__":
    main()
