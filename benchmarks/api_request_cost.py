r"""Where one ``POST /api/search``'s CPU goes: serve layer, query embedding, search.

In process (the app over ASGI, no socket, one request at a time after a warm-up),
over the same distinct queries: process CPU per request for

* the whole request (middleware, dependencies, worker-thread hops, validation, the
  engine's search, the query-log row, the response);
* the engine's search alone (``Ragline.search``: embedding, language, candidates,
  fusion, rows);
* the query embedding alone and the query's language detection alone;

so the serve layer's own cost is the first minus the second. CPU time rather than
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

from api_throughput import queries_from
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
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    settings = Settings().model_copy(update={"index_dir": args.index, "rate_limit_per_minute": 0})
    rag = Ragline(settings)
    rag.store.warm_up()  # type: ignore[attr-defined]
    app = create_app(settings, rag=rag)
    n, w = args.queries, args.warmup
    qs = queries_from(args.pool_index, w + 4 * n)
    sets = [qs[w + i * n : w + (i + 1) * n] for i in range(4)]  # each query new to each step
    loads = [load_average()[0]]
    out: dict[str, float] = {}

    async def requests() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                for q in qs[:w]:
                    r = await http.post("/api/search", json={"query": q, "max_results": 10})
                    r.raise_for_status()
                t0 = time.process_time()
                for q in sets[0]:
                    r = await http.post("/api/search", json={"query": q, "max_results": 10})
                    r.raise_for_status()
                out["whole request"] = (time.process_time() - t0) / n * 1000.0

    asyncio.run(requests())
    out["engine search (embedding included)"] = cpu_ms(
        lambda q: rag.search(q, mode="hybrid", top_k=10), sets[1]
    )
    out["  of which query embedding"] = cpu_ms(rag.embedder.embed_query, sets[2])
    out["  of which language detection (fastText)"] = cpu_ms(
        lambda q: detect_language.__wrapped__(q), sets[3]
    )
    out["serve layer (whole request − engine search)"] = (
        out["whole request"] - out["engine search (embedding included)"]
    )
    loads.append(load_average()[0])
    lines = [
        f"## `/api/search` CPU per request: {args.label}",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {args.index}; {n} distinct queries per step after {w} warm-ups, in "
        "process over ASGI (no socket), one request at a time; rate limit off",
        "",
        "| part | CPU ms per request |",
        "|---|---:|",
        *(f"| {k} | {v:.2f} |" for k, v in out.items()),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
