r"""A hybrid search's fixed cost before and after fusing inside the store, paired.

Issue 13 asks the embedded hybrid search to spend close to nothing beyond its two
candidate searches. This script runs ``Retriever.search(mode="hybrid")`` (weighted
fusion, search only: precomputed query vectors) two ways on the same LanceStore, the
same queries, alternating query by query so load drift hits both alike:

* ``store fusion`` (the default): ``LanceStore.candidates`` with weights runs both
  candidate searches on the mirror's snapshot and fuses them on row positions in
  numpy, looking ids up for the returned head only;
* ``pairs fusion`` (the previous path): the same store's two candidate searches
  as (id, score) pairs fused by id in Python (``weighted_pairs``), which is what
  ``candidates_in_turn`` does for any store.

Both must return the same hits with the same scores; the script checks it on every
query. On SciFact's eval index (``ragline eval`` builds it) or on a synthetic index
and its pool (``profile_search.py --synthetic N --work-dir DIR`` builds them):

    python benchmarks/search_fixed_cost.py --cache-dir /tmp/evalcache
    python benchmarks/search_fixed_cost.py --index /tmp/prof/scale-100000 \
        --pool-index /tmp/prof/pool
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from benchlib import emit, eval_index, pct
from machine import command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.eval.beir import load_beir
from ragline.eval.synthetic import PrecomputedEmbedder
from ragline.retrieve.retriever import Retriever
from ragline.settings import Settings
from ragline.store.base import CandidateQuery, Candidates, candidates_in_turn
from ragline.store.factory import make_store
from ragline.text.language import query_language


class PairsFusion:
    """A store whose weighted hybrid call is the default one (pairs fused in Python)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def candidates(self, query: CandidateQuery) -> Candidates:
        return candidates_in_turn(
            lambda v, k, f: self.store.candidates(CandidateQuery(k, v, filters=f)).vector,
            lambda t, k, f, b: self.store.candidates(CandidateQuery(k, None, t, f, b)).keyword,
            query,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache-dir", type=Path, default=None, help="ragline eval's cache dir")
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/scifact"))
    ap.add_argument("--index", type=Path, default=None, help="instead: a synthetic index")
    ap.add_argument("--pool-index", type=Path, default=None, help="its pool (queries)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    embedder = make_embedder(Settings())
    n = args.warmup + args.queries
    if args.index is not None:
        from api_throughput import queries_from

        if args.pool_index is None:
            raise SystemExit("--index needs --pool-index")
        folder, tenant = args.index, Settings().tenant
        texts = queries_from(args.pool_index, n)
        label = f"synthetic index {args.index}"
    else:
        folder, tenant = eval_index(args.cache_dir)
        texts = list(load_beir(args.data, "train").queries.values())[:n]
        label = "the `ragline eval` SciFact index (train queries)"
    settings = Settings().model_copy(update={"index_dir": folder, "tenant": tenant})
    store = make_store(settings, embedder.dimension)
    chunks = store.info().chunks
    store.warm_up()  # type: ignore[attr-defined]
    fast = PrecomputedEmbedder(embedder, texts)
    paths = {
        "store fusion (numpy, row positions)": Retriever(store, fast, settings),
        "pairs fusion (Python, ids; previous)": Retriever(PairsFusion(store), fast, settings),  # type: ignore[arg-type]
    }
    for q in texts:  # remembered per query: else whichever path runs a query first pays it
        query_language(q)
    for q in texts[: args.warmup]:
        for r in paths.values():
            r.search(q, mode="hybrid", expand=0)
    loads = [load_average()[0]]
    ms: dict[str, list[float]] = {name: [] for name in paths}
    fusion_ms: dict[str, list[float]] = {name: [] for name in paths}
    runs = list(paths.items())
    for i, q in enumerate(texts[args.warmup :]):
        results = {}
        for name, r in runs[i % 2 :] + runs[: i % 2]:
            t0 = time.perf_counter()
            res = r.search(q, mode="hybrid", expand=0)
            ms[name].append((time.perf_counter() - t0) * 1000.0)
            fusion_ms[name].append(res.timings_ms["fusion"])
            results[name] = [
                (h.chunk.id, h.score, h.rank, h.vector_score, h.keyword_score) for h in res.hits
            ]
        a, b = results.values()
        if a != b:
            raise SystemExit(f"the two paths disagree on {q!r}: {a} vs {b}")
        if i % 50 == 0:
            loads.append(load_average()[0])
    loads.append(load_average()[0])
    new, old = ms.values()
    ratio = statistics.median(x / y for x, y in zip(new, old, strict=True))
    lines = [
        "# Hybrid search's fixed cost: fusion in the store vs pairs fused in Python",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {label}, {chunks:,} chunks, LanceStore with its in-process mirror; "
        f"{args.queries} queries after {args.warmup} warm-ups, the two paths alternating "
        f"query by query; search only (precomputed query vectors), weighted fusion "
        f"{settings.hybrid_vector_weight}/{settings.hybrid_keyword_weight}, candidates "
        f"{settings.candidates}, top_k {settings.retrieval_top_k}",
        "- both paths returned the same hits, scores and ranks on every query; each "
        "query's language was detected before timing (it is remembered per query, so "
        "whichever path ran a query first would pay for it)",
        "",
        "| path | p50 ms | p95 ms | `fusion` stage p50 ms |",
        "|---|---:|---:|---:|",
        *(
            f"| {name} | {pct(xs, 50):.2f} | {pct(xs, 95):.2f} | {pct(fusion_ms[name], 50):.2f} |"
            for name, xs in ms.items()
        ),
        "",
        f"Median per-query ratio (store fusion / pairs fusion): {ratio:.2f}. The `fusion` "
        "stage of `SearchResult.timings_ms` holds the fusion itself and the hits' rows.",
        "",
    ]
    text = "\n".join(lines)
    emit(text, args.out)


if __name__ == "__main__":
    main()
