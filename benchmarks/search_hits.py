r"""Rows of the final hits, before and after a change, paired in one process.

Two copies of ragline search the same LanceDB index with the in-process mirror: the
working tree's (``ragline``) and an older commit's, renamed to ``ragline_old`` so both
import side by side. Per query they alternate which runs first; each query is run
warm (back to back) and cold (a 64 MiB array summed before each search, as another
search's or another process's work would evict the caches). Every result is compared
field by field (every Hit and Chunk field, the score's type), so a faster path that
changed an answer shows as ``differing results``. Then the same for the rows stage
alone: ``to_hits`` on the same fused head (the store's weighted candidates, top 10).
BASE is the commit to compare with (each result table names its own: c549ae9 for
search_hits_*.md, 08c3557 for store_protocol.md).

    git archive BASE src/ragline | tar -x -C /tmp/old
    mv /tmp/old/src/ragline /tmp/old/src/ragline_old
    grep -rl ragline /tmp/old/src/ragline_old --include='*.py' | xargs sed -i -E \
        's/\bragline\.(\w)/ragline_old.\1/g; s/from ragline import/from ragline_old import/g'
    python benchmarks/search_hits.py --old-src /tmp/old/src --cache-dir /tmp/evalcache
    python benchmarks/search_hits.py --old-src /tmp/old/src --synthetic 10000 --work-dir /tmp/prof

(``--cache-dir``: ``ragline eval``'s cache holding the SciFact index; ``--work-dir``: a
folder where ``profile_search.py --synthetic N`` built its index.)
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from benchlib import emit, eval_index, pct
from machine import command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.eval.beir import load_beir
from ragline.eval.synthetic import PrecomputedEmbedder, Window, pseudo_queries
from ragline.retrieve.retriever import Retriever, to_hits
from ragline.settings import Settings
from ragline.store.base import CandidateQuery
from ragline.store.factory import make_store


def every_field(result: Any) -> list[dict[str, Any]]:
    """Every field of every hit and of its chunk (types included), comparable across
    the two packages' classes."""
    out = []
    for hit in result.hits:
        row = {f.name: getattr(hit, f.name) for f in fields(hit) if f.name != "chunk"}
        row |= {f"chunk.{f.name}": getattr(hit.chunk, f.name) for f in fields(hit.chunk)}
        row["types"] = [type(v).__name__ for v in row.values()]
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-src", type=Path, required=True, help="folder holding ragline_old")
    ap.add_argument("--cache-dir", type=Path, default=None, help="ragline eval's cache dir")
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/scifact"))
    ap.add_argument("--synthetic", type=int, default=0, help="instead: this synthetic index")
    ap.add_argument("--work-dir", type=Path, default=None, help="where the synthetic index is")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--threshold", type=float, default=0.0, help="RELEVANCE_THRESHOLD")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(args.old_src))
    old_retriever = importlib.import_module("ragline_old.retrieve.retriever")
    old_settings = importlib.import_module("ragline_old.settings")
    old_factory = importlib.import_module("ragline_old.store.factory")

    embedder = make_embedder(Settings())
    n = args.warmup + args.queries
    if args.synthetic:
        folder = args.work_dir / f"scale-{args.synthetic}"
        tenant = Settings().tenant
        label = f"synthetic index of {args.synthetic:,} rows"
    else:
        folder, tenant = eval_index(args.cache_dir)
        label = "the `ragline eval` SciFact index"
    update = {"index_dir": folder, "tenant": tenant, "relevance_threshold": args.threshold}
    new_s = Settings().model_copy(update=update)
    old_s = old_settings.Settings().model_copy(update=update)
    new_store = make_store(new_s, embedder.dimension)
    old_store = old_factory.make_store(old_s, embedder.dimension)
    if args.synthetic:
        pool = [
            Window(c.title, c.chapter, c.text) for b, _ in new_store.iter_chunks(4096) for c in b
        ]
        texts = pseudo_queries(pool, n, 7)
    else:
        texts = list(load_beir(args.data, "train").queries.values())[:n]
    new_store.warm_up()  # type: ignore[attr-defined]
    old_store.warm_up()
    rows = new_store._mirrored().rows  # type: ignore[attr-defined]
    fast = PrecomputedEmbedder(embedder, texts)
    new = Retriever(new_store, fast, new_s)
    old = old_retriever.Retriever(old_store, fast, old_s)
    flush = np.ones(64 * 2**20 // 8)
    differing = 0
    for q in texts[: args.warmup]:
        for mode in ("hybrid", "vector", "bm25"):
            differing += every_field(new.search(q, mode=mode)) != every_field(
                old.search(q, mode=mode)
            )
    measured = texts[args.warmup :]
    loads = [load_average()[0]]
    table: list[tuple[str, list[float], list[float]]] = []
    weights = (new_s.hybrid_vector_weight, new_s.hybrid_keyword_weight)

    def paired(
        label: str, pair: Callable[[str], tuple[Callable[[], Any], Callable[[], Any]]]
    ) -> None:
        nonlocal differing
        for cold in (False, True):
            after: list[float] = []
            before: list[float] = []
            for i, q in enumerate(measured):
                run_new, run_old = pair(q)
                got: dict[str, Any] = {}
                order = [("new", run_new), ("old", run_old)]
                for name, fn in order if i % 2 else order[::-1]:
                    if cold:
                        flush.sum()
                    t0 = time.perf_counter()
                    got[name] = fn()
                    ms = (time.perf_counter() - t0) * 1000.0
                    (after if name == "new" else before).append(ms)
                if label.startswith("search"):
                    differing += every_field(got["new"]) != every_field(got["old"])
            table.append((f"{label}, {'cold' if cold else 'warm'}", before, after))
            loads.append(load_average()[0])

    def searches(q: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
        return (lambda: new.search(q, mode="hybrid")), (lambda: old.search(q, mode="hybrid"))

    def rows_stage(q: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
        qv = fast.embed_query(q)
        scope = {"tenant": tenant}
        ask = CandidateQuery(new_s.candidates, qv, q, scope, new_s.boosts, weights, 10)
        ranked = new_store.candidates(ask).fused
        assert ranked is not None
        head = ranked[:10]
        return (lambda: to_hits(head, new_store, qv)), (
            lambda: old_retriever.to_hits(head, old_store, qv)
        )

    paired("search (hybrid, search only)", searches)
    paired("rows of the 10 hits → Hit objects (to_hits)", rows_stage)
    new_store.close()
    old_store.close()

    lines = [
        "# Rows of the final hits: before and after, paired in one process",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {label} ({rows:,} chunks), LanceStore with the in-process mirror; "
        f"{len(measured)} queries after {args.warmup} warm-ups; hybrid weighted, top_k 10, "
        f"relevance threshold {args.threshold}",
        "- before = the older commit (package `ragline_old`), after = this tree; the two "
        "alternate which runs first per query; cold = a 64 MiB array summed before each call",
        f"- results differing in any field (every mode on the warm-ups, hybrid on every "
        f"timed search): **{differing}**",
        "",
        "| what | before p50 ms | after p50 ms | before p95 ms | after p95 ms "
        "| median paired ratio after ÷ before |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for what, before, after in table:
        ratio = statistics.median(a / b for a, b in zip(after, before, strict=True))
        lines.append(
            f"| {what} | {pct(before, 50):.3f} | {pct(after, 50):.3f} | {pct(before, 95):.3f} "
            f"| {pct(after, 95):.3f} | {ratio:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
