r"""Does coalescing concurrent queries into shared ONNX runs pay? CPU per query.

The default embedder (all-MiniLM-L6-v2 int8, one thread per run) embeds ``--queries``
distinct short queries (``ragline bench``'s pseudo-queries, as ``/api/search``'s
throughput benchmark sends them):

1. in batches of 1, 2, 4, 8 and 16, each batch either one run padded to its longest
   query or split by length (``plan_query_runs``, what ships); batch sizes and
   variants rotate round by round so load drift on a shared machine hits them alike;
   CPU per query is the median over rounds, with the largest difference between a
   batched vector and the same query embedded alone;
2. from ``--threads`` threads at once, each query through ``embed_query``, without
   and with :class:`CoalescingEmbedder` (``--max-batch``; 1 to ``--max-runs`` runs at
   once), rotated: process CPU and wall time per query, and the mean batch formed;
3. one query alone by part: tokenisation, input arrays, model run.

    PYTHONPATH=src python benchmarks/query_batching.py --pool-index /tmp/prof/pool
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import ragline.embed.onnx as onnx_module
from api_throughput import queries_from
from benchlib import emit
from machine import command_line, load_average, machine_lines
from ragline.embed.base import Vectors
from ragline.embed.coalesce import CoalescingEmbedder
from ragline.embed.onnx import OnnxEmbedder, pad_batch


def batches(emb: OnnxEmbedder, qs: list[str], b: int, grouped: bool) -> tuple[float, Vectors]:
    """CPU ms per query, and the vectors, embedding ``qs`` ``b`` at a time."""
    saved = onnx_module.RUN_FIXED_COST_TOKENS
    onnx_module.RUN_FIXED_COST_TOKENS = saved if grouped else 1e12  # 1e12: one run per batch
    try:
        t0 = time.process_time()
        out = [emb.embed_queries(qs[i : i + b]) for i in range(0, len(qs), b)]
        cpu = (time.process_time() - t0) / len(qs) * 1000.0
    finally:
        onnx_module.RUN_FIXED_COST_TOKENS = saved
    return cpu, np.concatenate(out)


def concurrent(emb: object, qs: list[str], threads: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per query, ``threads`` threads each calling ``embed_query``."""
    fn = emb.embed_query  # type: ignore[attr-defined]
    t0, w0 = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fn, qs))
    return (time.process_time() - t0) / len(qs) * 1e3, (time.perf_counter() - w0) / len(qs) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool-index", type=Path, required=True, help="where queries are cut from")
    ap.add_argument("--queries", type=int, default=320, help="per batch size and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="1,2,4,8,16")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--max-runs", type=int, default=2, help="coalesced: 1 … this many at once")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    emb = OnnxEmbedder(threads=1)
    qs = queries_from(args.pool_index, args.queries)
    lengths = [len(e.ids) for e in emb._encoder.encode_batch(qs)]
    single = np.stack([emb.embed_query(q) for q in qs])  # warm-up and the reference
    loads = [load_average()[0]]
    variants = [(b, g) for b in sizes for g in (False, True)]
    cpu: dict[tuple[int, bool], list[float]] = {v: [] for v in variants}
    diff = dict.fromkeys(variants, 0.0)
    for r in range(args.rounds):
        for b, g in variants[r % len(variants) :] + variants[: r % len(variants)]:
            c, vecs = batches(emb, qs, b, g)
            cpu[(b, g)].append(c)
            diff[(b, g)] = max(diff[(b, g)], float(np.abs(vecs - single).max()))

    runs: list[int] = []

    def counted(texts: list[str]) -> Vectors:
        runs.append(len(texts))
        return emb.embed_queries(texts)

    targets: dict[str, object] = {"alone": emb}
    for m in range(1, args.max_runs + 1):
        targets[f"coalesced, {m} run(s) at once"] = CoalescingEmbedder(
            emb, counted, args.max_batch, max_runs=m
        )
    conc: dict[str, list[tuple[float, float]]] = {k: [] for k in targets}
    batch_of: dict[str, list[int]] = {k: [] for k in targets}
    names = list(targets)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs.clear()
            conc[name].append(concurrent(targets[name], qs, args.threads))
            batch_of[name] += runs

    n = len(qs)
    t0 = time.process_time()
    encs = [emb._encoder.encode_batch([q]) for q in qs]
    tok = (time.process_time() - t0) / n * 1e3
    t0 = time.process_time()
    feeds = []
    for e in encs:
        ids, mask = pad_batch(e)
        feeds.append(
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
    prep = (time.process_time() - t0) / n * 1e3
    session = emb._load()
    t0 = time.process_time()
    for f in feeds:
        session.run(["last_hidden_state"], f)
    run = (time.process_time() - t0) / n * 1e3
    loads.append(load_average()[0])
    base = float(np.median(cpu[(1, True)]))
    lines = [
        "## Query embedding: CPU per query by batch size",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- {n} distinct pseudo-queries from {args.pool_index} (tokens incl. [CLS]/[SEP]: "
        f"median {int(np.median(lengths))}, 90th percentile {int(np.percentile(lengths, 90))}, "
        f"max {max(lengths)}); all-MiniLM-L6-v2 int8 ONNX, one thread per run; "
        f"{args.rounds} rounds, variants rotated each round; CPU is the median over rounds",
        "",
        "| queries per batch | one run, padded to the longest: CPU ms per query | "
        "split by length: CPU ms per query | vs 1 | max abs diff to the query alone |",
        "|---:|---:|---:|---:|---:|",
    ]
    for b in sizes:
        one, split = float(np.median(cpu[(b, False)])), float(np.median(cpu[(b, True)]))
        d = max(diff[(b, False)], diff[(b, True)])
        lines.append(f"| {b} | {one:.2f} | {split:.2f} | {split / base:.2f} | {d:.1e} |")
    lines += [
        "",
        f"{args.threads} threads calling `embed_query` at once ({n} queries per round, "
        f"median over {args.rounds} rounds, paths rotated); coalesced: at most "
        f"{args.max_batch} per batch:",
        "",
        "| path | CPU ms per query | wall ms per query | mean batch |",
        "|---|---:|---:|---:|",
    ]
    for name, vals in conc.items():
        c = float(np.median([v[0] for v in vals]))
        w = float(np.median([v[1] for v in vals]))
        mean = f"{np.mean(batch_of[name]):.1f}" if batch_of[name] else "1"
        lines.append(f"| {name} | {c:.2f} | {w:.2f} | {mean} |")
    lines += [
        "",
        f"One query alone, by part (CPU ms): tokenisation {tok:.3f}, input arrays {prep:.3f}, "
        f"model run {run:.3f}.",
        "",
    ]
    text = "\n".join(lines)
    emit(text, args.out, append=True)


if __name__ == "__main__":
    main()
