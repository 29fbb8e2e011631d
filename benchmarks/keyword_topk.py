r"""BM25 top-k of the in-process mirror: exhaustive scoring against MaxScore, paired.

Opens an existing LanceDB index (``ragline bench``'s synthetic one, or SciFact's
``ragline eval`` index), builds the mirror once and, query by query, times the
exhaustive scorer (``KeywordIndex.scores`` + ``top_k``, what the mirror ran before)
and ``KeywordIndex.top`` (MaxScore, the pruning forced on at any size) in turns, the
order alternating per query so that load drift hits both alike. Every query's top-k
must be identical (same rows, same float64 scores); the script stops otherwise.

    python benchmarks/keyword_topk.py --index-dir /tmp/i13core/prof/scale-1000000
    python benchmarks/keyword_topk.py --cache-dir /tmp/i13core/evalcache   # SciFact train
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchlib import emit, eval_index, pct
from machine import command_line, load_average, machine_lines
from ragline.eval.beir import load_beir
from ragline.eval.synthetic import Window, pseudo_queries
from ragline.settings import Settings
from ragline.store.factory import make_store
from ragline.store.filters import to_sql_predicate
from ragline.store.vector_index import top_k
from ragline.text.bm25 import query_counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", type=Path, help="a synthetic index (profile_search.py)")
    ap.add_argument("--cache-dir", type=Path, help="instead: ragline eval's cache dir")
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/scifact"))
    ap.add_argument("--split", default="train")
    ap.add_argument("--queries", type=int, default=200, help="pseudo-queries (synthetic)")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--k", type=int, default=0, help="candidates (default: the setting)")
    ap.add_argument("--repeats", type=int, default=1, help="timed passes over the queries")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    settings = Settings()
    if args.cache_dir:
        folder, tenant = eval_index(args.cache_dir)
        label = "the `ragline eval` SciFact index"
    else:
        folder, tenant, label = args.index_dir, settings.tenant, f"index {args.index_dir}"
    settings = settings.model_copy(update={"index_dir": folder, "tenant": tenant})
    store = make_store(settings, 384)
    loads = [load_average()[0]]
    t0 = time.perf_counter()
    store.info()
    store.warm_up()  # type: ignore[attr-defined]
    build_s = time.perf_counter() - t0
    snap = store._mirror._snapshot  # type: ignore[attr-defined]
    kw = snap.keywords
    if args.cache_dir:
        texts = list(load_beir(args.data, args.split).queries.values())
        warm: list[str] = []
    else:
        pool = [Window(c.title, c.chapter, c.text) for b, _ in store.iter_chunks(4096) for c in b]
        texts = pseudo_queries(pool, args.warmup + args.queries, 7)
        del pool
        warm, texts = texts[: args.warmup], texts[args.warmup :]
    b = settings.boosts
    boosts = (b.title, b.headings, b.text)
    k = args.k or settings.candidates
    # the tenant filter, as every search applies it (None when the table holds one tenant)
    pred = to_sql_predicate({"tenant": tenant})
    allowed = store._mirror.mask(snap, pred)  # type: ignore[attr-defined]

    def exhaustive(counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        scores = kw.scores(counts, boosts)
        rows = top_k(scores, k, allowed)
        rows = rows[scores[rows] > 0]
        return rows, scores[rows]

    def pruned(counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        return kw.top(counts, boosts, k, allowed, min_rows=0)  # type: ignore[no-any-return]

    queries = [dict(query_counts(q)) for q in texts]
    for q in warm:
        exhaustive(dict(query_counts(q)))
        pruned(dict(query_counts(q)))
    old: list[float] = []
    new: list[float] = []
    postings: list[int] = []
    identical = 0
    for rep in range(args.repeats):
        for i, counts in enumerate(queries):
            if i % 50 == 0:
                loads.append(load_average()[0])
            runs = [(exhaustive, old), (pruned, new)]
            if (i + rep) % 2:
                runs.reverse()
            got = {}
            for fn, sink in runs:
                t = time.perf_counter()
                got[fn] = fn(counts)
                sink.append((time.perf_counter() - t) * 1000.0)
            (ra, sa), (rb, sb) = got[exhaustive], got[pruned]
            if not (np.array_equal(ra, rb) and np.array_equal(sa, sb)):
                raise SystemExit(f"top-{k} differs on query {i}: {texts[i]!r}")
            identical += 1
            if rep == 0:
                postings.append(sum(hi - lo for _, _, lo, hi, _ in kw._postings(counts, boosts)))
    loads.append(load_average()[0])
    ratio = float(np.median(np.array(new) / np.array(old)))
    lines = [
        "# BM25 top-k: exhaustive scoring against MaxScore, paired",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {label} ({kw.rows:,} rows, vocabulary {len(kw.vocab):,} terms); "
        f"{len(queries)} queries × {args.repeats}, top-{k}, boosts title/headings/text "
        f"{boosts[0]}/{boosts[1]}/{boosts[2]}; mirror built in {build_s:.1f} s",
        f"- identical top-{k} (rows and float64 scores) on {identical} of "
        f"{len(queries) * args.repeats} query runs",
        f"- postings of the query terms per query: median {pct(postings, 50):,.0f}, "
        f"p95 {pct(postings, 95):,.0f}",
        "",
        "| BM25 top-k | p50 ms | p95 ms | mean ms |",
        "|---|---:|---:|---:|",
        f"| exhaustive (scores + top_k) | {pct(old, 50):.2f} | {pct(old, 95):.2f} "
        f"| {np.mean(old):.2f} |",
        f"| MaxScore (KeywordIndex.top) | {pct(new, 50):.2f} | {pct(new, 95):.2f} "
        f"| {np.mean(new):.2f} |",
        "",
        f"Median per-query ratio MaxScore / exhaustive: {ratio:.2f}.",
        "",
    ]
    text = "\n".join(lines)
    emit(text, args.out)
    store.close()


if __name__ == "__main__":
    main()
