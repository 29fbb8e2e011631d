r"""A hybrid search's vector and BM25 stages on two cores, against one after the other.

One LanceStore with the in-process mirror, one process, the same query vectors; per
query, four timings in rotating order so load drift hits them alike: the store's
candidate-and-fusion call (``weighted_candidates``) and the whole search
(``Retriever.search``, precomputed query vectors), each with the stages overlapped
(``lance_parallel_rows`` 0) and one after the other (a threshold above the table).
Both orders must give the same candidates and scores; the script counts any that
differ. The spare-core gate is off here (every "parallel" run overlaps); instead the
idle cores the gate would see (:class:`SpareCores`) are sampled per query, and the
paired ratio is given per band of them: the data for the gate's threshold. Opens an
existing index read-only (nothing is built or written):

    python benchmarks/parallel_stages.py --cache-dir /tmp/i13core/evalcache \
        --out benchmarks/results/parallel_stages.md
    python benchmarks/parallel_stages.py --synthetic 100000 --work-dir /tmp/i13core/prof \
        --out benchmarks/results/parallel_stages.md

``--out`` appends one section per run to the file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchlib import emit, eval_index, pct
from machine import command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.eval.beir import load_beir
from ragline.eval.synthetic import PrecomputedEmbedder, Window, pseudo_queries
from ragline.retrieve.retriever import Retriever
from ragline.settings import Settings
from ragline.store.base import CandidateQuery
from ragline.store.factory import make_store
from ragline.store.stages import STAGES, SpareCores
from ragline.types import Chunk

NEVER = 10**12  # a row threshold no table reaches: the stages run one after the other


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/scifact"))
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache-dir", type=Path, default=None, help="ragline eval's cache dir")
    ap.add_argument("--synthetic", type=int, default=0, help="rows of an existing scale-N index")
    ap.add_argument("--work-dir", type=Path, default=None, help="where scale-N lies")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None, help="append the section to this file")
    args = ap.parse_args()

    embedder = make_embedder(Settings())
    if args.synthetic:
        folder = args.work_dir / f"scale-{args.synthetic}"
        if not (folder / "built").exists():
            sys.exit(f"{folder}: no built index (profile_search.py --synthetic builds one)")
        tenant = Settings().tenant
        label = f"synthetic {args.synthetic:,} rows ({folder})"
    else:
        folder, tenant = eval_index(args.cache_dir)
        label = "SciFact (`ragline eval` index)"
    settings = Settings().model_copy(update={"index_dir": folder, "tenant": tenant})
    store = make_store(settings, embedder.dimension)
    if args.synthetic:
        chunks: list[Chunk] = []
        for batch, _ in store.iter_chunks(4096):
            chunks += batch
            if len(chunks) >= 20_000:  # enough text to cut queries from
                break
        pool = [Window(c.title, c.chapter, c.text) for c in chunks]
        texts = pseudo_queries(pool, args.warmup + args.queries, 7)
    else:
        texts = list(load_beir(args.data, args.split).queries.values())
        texts = texts[: args.warmup + args.queries]
    fast = PrecomputedEmbedder(embedder, texts)
    t0 = time.perf_counter()
    rows = store.info().chunks
    store.warm_up()  # type: ignore[attr-defined]
    load_s = time.perf_counter() - t0
    retriever = Retriever(store, fast, settings)
    scope = {"tenant": tenant}
    w = (settings.hybrid_vector_weight, settings.hybrid_keyword_weight)

    def candidates(q: str) -> tuple[list[Any], dict[str, float]]:
        ask = CandidateQuery(settings.candidates, fast.embed_query(q), q, scope, settings.boosts)
        found = store.candidates(replace(ask, weights=w, limit=10))
        return found.fused or [], found.ms

    def at(threshold: int, fn: Callable[[], Any]) -> tuple[float, Any]:
        store.parallel_rows = threshold  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        out = fn()
        return (time.perf_counter() - t0) * 1000.0, out

    runs = {
        "store call, parallel": (0, candidates),
        "store call, sequential": (NEVER, candidates),
        "search, parallel": (0, lambda q: retriever.search(q, mode="hybrid")),
        "search, sequential": (NEVER, lambda q: retriever.search(q, mode="hybrid")),
    }
    ms: dict[str, list[float]] = {name: [] for name in runs}
    stage_ms: dict[str, dict[str, list[float]]] = {"parallel": {}, "sequential": {}}
    differ = 0
    loads = [load_average()[0]]
    STAGES.load = None  # overlap whenever asked; the spare cores are recorded instead
    sampler = SpareCores(STAGES.cores, window=0.1)
    sampler.spare()
    spares: list[float] = []
    for i, q in enumerate(texts):
        names = list(runs)
        shift = i % len(names)
        got: dict[str, Any] = {}
        spare = sampler.spare(STAGES.worker_cpu)
        for name in names[shift:] + names[:shift]:
            threshold, fn = runs[name]
            dt, got[name] = at(threshold, lambda fn=fn, q=q: fn(q))
            if i >= args.warmup:
                ms[name].append(dt)
        if i < args.warmup:
            continue
        spares.append(float("nan") if spare is None else spare)
        par, seq = got["store call, parallel"], got["store call, sequential"]
        differ += par[0] != seq[0]
        for mode in ("parallel", "sequential"):
            for k, v in got[f"store call, {mode}"][1].items():
                stage_ms[mode].setdefault(k, []).append(v)
        if i % 50 == 0:
            loads.append(load_average()[0])
    loads.append(load_average()[0])
    store.close()

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(ms[a], ms[b], strict=True))

    n = len(ms["search, parallel"])
    bands = [(-9.0, 0.0), (0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, 9.0)]
    band_lines = []
    for lo, hi in bands:
        at_band = [i for i, x in enumerate(spares) if lo <= x < hi]
        if not at_band:
            continue
        r = statistics.median(
            ms["search, parallel"][i] / ms["search, sequential"][i] for i in at_band
        )
        p95 = [
            pct([ms[f"search, {m}"][i] for i in at_band], 95) for m in ("parallel", "sequential")
        ]
        band_lines.append(
            f"| {max(lo, -2):.1f} … {min(hi, 2):.1f} | {len(at_band)} | {r:.2f} | "
            f"{p95[0]:.2f} / {p95[1]:.2f} |"
        )
    lines = [
        f"## {label}: {rows:,} chunks",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- {n} queries after {args.warmup} warm-ups, candidates {settings.candidates}, "
        f"mirror loaded in {load_s:.1f} s; four timings per query in rotating order",
        f"- candidates or scores that differ between the two orders: {differ} of {n} queries",
        "",
        "| path | p50 ms | p95 ms |",
        "|---|---:|---:|",
        *(f"| {k} | {pct(v, 50):.2f} | {pct(v, 95):.2f} |" for k, v in ms.items()),
        *(
            f"| stage `{k}` ({mode}) | {pct(v, 50):.2f} | {pct(v, 95):.2f} |"
            for mode, stages in stage_ms.items()
            for k, v in stages.items()
        ),
        "",
        "Median per-query ratio parallel / sequential: store call "
        f"{ratio('store call, parallel', 'store call, sequential'):.2f}, search "
        f"{ratio('search, parallel', 'search, sequential'):.2f}.",
        "",
        "By the idle cores the gate saw just before the query (every core's busy time "
        "less the stage worker's; on 2 cores, 1 = one core idle besides this search "
        "loop, ≤ 0 = every core busy):",
        "",
        "| idle cores | queries | median ratio parallel / sequential (search) | "
        "p95 parallel / sequential ms |",
        "|---|---:|---:|---:|",
        *band_lines,
        "",
    ]
    text = "\n".join(lines)
    emit(text, args.out, append=True)


if __name__ == "__main__":
    main()
