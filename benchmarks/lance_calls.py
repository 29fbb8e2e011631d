r"""Where a hybrid search's time goes on LanceDB: each store call timed on its own.

Builds (or reuses, under ``--work-dir``) a synthetic index the way ``ragline bench``
does (the chunks ingested from PATH as the pool, ``build_index``, seed 7), then times
single LanceDB calls over pseudo-queries: the vector query at several refine factors
(with recall@200 against a brute-force scan), the BM25 query, both at once, and the
row loads that follow. Prints a Markdown table (p50 / p95 ms); the results are in
``benchmarks/results/bench.md`` (Run D, "Where the time goes").

    python benchmarks/lance_calls.py \
        ../shared/data/d2l-en/chapter_appendix-mathematics-for-deep-learning
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import numpy as np
from lancedb.query import AsyncVectorQuery, FullTextOperator, MultiMatchQuery

from ragline.embed.factory import make_embedder
from ragline.eval.synthetic import Synthetic, build_index, markdown_windows, pseudo_queries
from ragline.settings import Settings
from ragline.store import lance_search, lance_tables
from ragline.store.base import CHUNK_COLUMNS
from ragline.store.lance import LanceStore
from ragline.store.reads import vectors_for

TENANT = "tenant = 'default'"


def timed(fn: Callable[[str], Any], warm: list[str], queries: list[str]) -> tuple[float, float]:
    for q in warm:
        fn(q)
    ms = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        ms.append((time.perf_counter() - t0) * 1000.0)
    ms.sort()
    return statistics.median(ms), ms[int(0.95 * (len(ms) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="Markdown folder whose text makes the pool")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--pool", type=int, default=600, help="pool windows embedded for real")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work-dir", type=Path, default=None, help="keep the index here")
    args = ap.parse_args()

    settings = Settings()
    embedder = make_embedder(settings)
    windows = markdown_windows(args.path, 60, 30)[: args.pool]
    if not windows:
        raise SystemExit(f"{args.path}: no Markdown text")
    vectors = embedder.embed_documents([w.text for w in windows])
    data = Synthetic(windows, vectors, 0.03, 7)
    all_queries = pseudo_queries(windows, 20 + args.queries, 7)
    warm, queries = all_queries[:20], all_queries[20:]
    qv = {q: np.asarray(embedder.embed_query(q), dtype=np.float32) for q in all_queries}

    with tempfile.TemporaryDirectory(prefix="lance-calls-", dir=args.work_dir) as tmp:
        store = LanceStore(Path(tmp) / "lance", dimension=embedder.dimension, memory_index=False)
        build_index(store, data, args.rows, 2000, embedder.fingerprint)
        table = store._table()  # the timed calls are LanceDB's own, below the store API

        def run(coro: Coroutine[Any, Any, Any]) -> Any:
            return lance_tables.run(coro)

        def vector(q: str, refine: int | None, columns: list[str]) -> AsyncVectorQuery:
            query = (
                table.query()
                .nearest_to(qv[q])
                .column("vector")
                .distance_type("cosine")
                .select(columns)
                .limit(200)
                .nprobes(settings.ann_nprobes)
                .where(TENANT)
            )
            return query.refine_factor(refine) if refine else query

        def bm25(q: str) -> Any:
            b = settings.boosts
            fts = MultiMatchQuery(
                lance_search.sanitize_fts_query(q),
                ["title", "headings", "text"],
                boosts=[b.title, b.headings, b.text],
                operator=FullTextOperator.OR,
            )
            return table.query().nearest_to_text(fts).select(["id", "_score"]).limit(200)

        exact = {
            q: set(
                run(
                    table.query()
                    .nearest_to(qv[q])
                    .column("vector")
                    .distance_type("cosine")
                    .select(["id"])
                    .limit(200)
                    .where(TENANT)
                    .bypass_vector_index()
                    .to_arrow()
                )
                .column("id")
                .to_pylist()
            )
            for q in queries
        }
        ids = {
            q: run(vector(q, 2, ["id"]).with_row_id().to_arrow()).slice(0, 10)
            for q in warm + queries
        }

        async def both(q: str) -> Any:
            return await asyncio.gather(
                vector(q, 2, ["id", "_distance"]).to_arrow(), bm25(q).where(TENANT).to_arrow()
            )

        rows: list[tuple[str, Callable[[str], Any]]] = []
        refines: dict[str, int | None] = {}  # vector rows: their refine factor, for recall
        for refine in (4, 2, None):
            name = f"vector, k = 200, id + distance, tenant filter, refine factor {refine or 'off'}"
            refines[name] = refine
            rows.append(
                (name, lambda q, r=refine: run(vector(q, r, ["id", "_distance"]).to_arrow()))
            )
        rows += [
            ("BM25, k = 200, id + score, 3 boosted fields, tenant filter",
             lambda q: run(bm25(q).where(TENANT).to_arrow())),
            ("vector and BM25 together in one `asyncio.gather`", lambda q: run(both(q))),
            ("load 10 rows by id, all chunk columns + vector (`id IN (…)`)",
             lambda q: store.chunks_with_vectors(ids[q].column("id").to_pylist())),
            ("load 10 rows by row id, `id` column only",
             lambda q: run(table.take_row_ids(ids[q].column("_rowid").to_pylist())
                           .select(["id"]).to_arrow())),
            ("load 10 rows by row id, `id` + `text`",
             lambda q: run(table.take_row_ids(ids[q].column("_rowid").to_pylist())
                           .select(["id", "text"]).to_arrow())),
            ("vectors of 10 rows by id (a separate cosine read)",
             lambda q: vectors_for(store, ids[q].column("id").to_pylist())),
        ]  # fmt: skip
        print(f"{args.rows:,} rows, {len(CHUNK_COLUMNS)} chunk columns, {len(queries)} queries")
        print("\n| call | p50 | p95 | recall@200 |\n|---|---|---|---|")
        for name, fn in rows:
            p50, p95 = timed(fn, warm, queries)
            recall = ""
            if name in refines:
                found = [
                    run(vector(q, refines[name], ["id"]).to_arrow()).column("id").to_pylist()
                    for q in queries
                ]
                shares = [len(set(f) & exact[q]) / 200 for f, q in zip(found, queries, strict=True)]
                recall = f"{np.mean(shares):.3f}"
            print(f"| {name} | {p50:.1f} | {p95:.1f} | {recall} |")
        store.close()


if __name__ == "__main__":
    main()
