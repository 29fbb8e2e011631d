r"""Where a hybrid search's milliseconds go, next to an in-memory baseline, in one run.

On the SciFact eval index (``ragline eval`` builds it; 9,133 chunks), the same query
vectors, queries interleaved query by query so load drift hits every path alike:

* ``ragline``: ``Retriever.search(mode="hybrid")`` on a LanceStore twice, with
  LanceDB's own vector and full-text queries (``RAGLINE_LANCE_MEMORY_INDEX=false``)
  and with the in-process mirror (the default), search only (precomputed query
  vectors); then each one's stages measured on the same query: the store's
  candidate-and-fusion call (``weighted_candidates``: vector, BM25, fusion), loading
  the returned hits' rows, and, for comparison, the previous path's fusion of
  (id, score) pairs in Python;
* ``baseline``: a script at the limit of plain Python + numpy: exact cosine over all
  vectors (one matmul), bm25s top-200 over title + text, the same weighted min-max
  fusion over dicts, rows from a Python list;
* end to end: the same two with the query embedding included.

    RAGLINE_EVAL_CACHE_DIR=/tmp/i13/evalcache ragline eval ../shared/data/scifact --split train
    python benchmarks/profile_search.py --cache-dir /tmp/i13/evalcache \
        --out benchmarks/results/profile.md

or, on ``ragline bench``'s synthetic corpus at a given size (index kept in --work-dir):

    python benchmarks/profile_search.py --synthetic 100000 --work-dir /tmp/prof

Needs ``bm25s`` (``pip install bm25s==0.3.16``), only for the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import snowballstemmer

from benchlib import emit, eval_index, pct
from machine import command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.engine import Ragline
from ragline.eval.beir import load_beir
from ragline.eval.synthetic import (
    PrecomputedEmbedder,
    Synthetic,
    Window,
    build_index,
    pseudo_queries,
)
from ragline.retrieve.retriever import Retriever, fuse, to_hits
from ragline.settings import Settings
from ragline.store.base import CandidateQuery
from ragline.store.factory import make_store
from ragline.types import Chunk


class Baseline:
    """numpy exact cosine + bm25s top-k + weighted min-max fusion: the floor to compare to."""

    def __init__(self, chunks: list[Chunk], vectors: np.ndarray, depth: int, wv: float, wk: float):
        self.chunks = chunks
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.depth = depth
        self.wv, self.wk = wv, wk
        self.stemmer = snowballstemmer.stemmer("english")
        corpus = [f"{c.title}\n{c.text}" for c in chunks]
        tokens = bm25s.tokenize(corpus, stopwords="en", stemmer=self.stemmer, show_progress=False)
        self.bm25 = bm25s.BM25()
        self.bm25.index(tokens, show_progress=False)

    def search(self, query: str, qvec: np.ndarray, top_k: int = 10) -> list[tuple[Chunk, float]]:
        sims = self.vectors @ qvec
        k = min(self.depth, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        vec = dict(zip(top.tolist(), sims[top].tolist(), strict=True))
        qt = bm25s.tokenize(
            [query], stopwords="en", stemmer=self.stemmer, show_progress=False, return_ids=False
        )
        docs, scores = self.bm25.retrieve(qt, k=k, show_progress=False, n_threads=1)
        kw = {int(d): float(s) for d, s in zip(docs[0], scores[0], strict=True) if s > 0}
        fused: dict[int, float] = {}
        for scores_of, w in ((vec, self.wv), (kw, self.wk)):
            if not scores_of:
                continue
            lo, hi = min(scores_of.values()), max(scores_of.values())
            span = hi - lo
            for i, s in scores_of.items():
                fused[i] = fused.get(i, 0.0) + w * ((s - lo) / span if span else 1.0)
        best = sorted(fused.items(), key=lambda kv: -kv[1])[:top_k]
        return [(self.chunks[i], s) for i, s in best]


class Txtai:
    """txtai's hybrid ``Embeddings`` (its defaults: BM25 scoring normalised, faiss dense
    index, 0.5/0.5 convex fusion) over the same chunks and the same vectors: txtai's
    ``external`` transform hands it the stored vectors while indexing and the query
    vector the caller chooses while searching, so both sides embed nothing new and
    the search engines are what is compared."""

    def __init__(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        from txtai import Embeddings

        pending = iter(np.asarray(vectors, dtype=np.float32))
        self.query_vector: Callable[[str], np.ndarray] | None = None

        def transform(texts: list[str]) -> np.ndarray:
            if self.query_vector is None:  # indexing: the rows' own vectors, in order
                return np.stack([next(pending) for _ in texts])
            return np.stack([self.query_vector(t) for t in texts])

        config = {"method": "external", "transform": transform, "hybrid": True, "content": False}
        self.embeddings = Embeddings(config)
        self.embeddings.index((str(i), f"{c.title}\n{c.text}", None) for i, c in enumerate(chunks))
        if next(pending, None) is not None:
            raise RuntimeError("txtai did not take one vector per row while indexing")
        self.chunks = chunks

    def search(self, query: str, query_vector: Callable[[str], np.ndarray]) -> list[Chunk]:
        self.query_vector = query_vector
        return [self.chunks[int(uid)] for uid, _ in self.embeddings.search(query, 10)]


def synthetic_index(args: argparse.Namespace, embedder: Any) -> Path:
    """``ragline bench``'s synthetic index (seed 7) under ``--work-dir``, built once."""
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="ragline-profile-"))
    folder = work / f"scale-{args.synthetic}"
    if (folder / "built").exists():
        return folder
    settings = Settings().model_copy(update={"index_dir": work / "pool"})
    rag = Ragline(settings, embedder=embedder)
    try:
        if rag.store.info().chunks == 0:
            rag.ingest(args.pool)
        windows: list[Window] = []
        parts = []
        for chunks, vectors in rag.store.iter_chunks(1024):
            windows += [Window(c.title, c.chapter, c.text) for c in chunks]
            parts.append(vectors)
    finally:
        rag.close()
    order = np.random.default_rng(7).permutation(len(windows))
    data = Synthetic([windows[i] for i in order], np.concatenate(parts)[order], 0.03, 7)
    s = settings.model_copy(update={"index_dir": folder})
    store = make_store(s, embedder.dimension)
    build_index(store, data, args.synthetic, 2000, embedder.fingerprint, s.tenant)
    store.close()
    (folder / "built").write_text("ok")
    return folder


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/scifact"))
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache-dir", type=Path, default=None, help="ragline eval's cache dir")
    ap.add_argument(
        "--synthetic",
        type=int,
        default=0,
        help="instead: a synthetic index of this many rows (ragline bench's generator) over "
        "the chunks of --pool, with pseudo-queries",
    )
    ap.add_argument(
        "--pool",
        type=Path,
        default=Path("/work/shared/data/d2l-en/chapter_appendix-mathematics-for-deep-learning"),
    )
    ap.add_argument("--work-dir", type=Path, default=None, help="keep the synthetic index here")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--txtai",
        action="store_true",
        help="add txtai's hybrid search (pip install --target DIR txtai==9.14.0 "
        "faiss-cpu==1.15.1 msgpack==1.1.2 --no-deps; PYTHONPATH=DIR)",
    )
    ap.add_argument(
        "--no-lancedb", action="store_true", help="leave out LanceDB's own queries (slow at 1M)"
    )
    args = ap.parse_args()

    embedder = make_embedder(Settings())
    if args.synthetic:
        folder = synthetic_index(args, embedder)
        tenant = Settings().tenant
        label = f"synthetic index of {args.synthetic:,} rows over the chunks of {args.pool}"
    else:
        folder, tenant = eval_index(args.cache_dir)
        label = "the `ragline eval` SciFact index"
    settings = Settings().model_copy(update={"index_dir": folder, "tenant": tenant})
    stores = {"in-process mirror": make_store(settings, embedder.dimension)}
    if not args.no_lancedb:
        stores["LanceDB queries"] = make_store(
            settings.model_copy(update={"lance_memory_index": False}), embedder.dimension
        )
    any_store = stores["in-process mirror"]
    chunks: list[Chunk] = []
    parts = []
    for batch, vecs in any_store.iter_chunks(4096):
        chunks += batch
        parts.append(vecs)
    vectors = np.concatenate(parts)
    if args.synthetic:
        pool = [Window(c.title, c.chapter, c.text) for c in chunks]
        texts = pseudo_queries(pool, args.warmup + args.queries, 7)
    else:
        texts = list(load_beir(args.data, args.split).queries.values())
        texts = texts[: args.warmup + args.queries]
    warm, measured = texts[: args.warmup], texts[args.warmup :]
    fast = PrecomputedEmbedder(embedder, texts)
    base = Baseline(
        chunks, vectors, settings.candidates, settings.hybrid_vector_weight,
        settings.hybrid_keyword_weight,
    )  # fmt: skip
    t0 = time.perf_counter()
    stores["in-process mirror"].info()
    stores["in-process mirror"].warm_up()  # type: ignore[attr-defined]
    mirror_build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    peer = Txtai(chunks, vectors) if args.txtai else None
    txtai_build_s = time.perf_counter() - t0
    retrievers = {name: Retriever(st, fast, settings) for name, st in stores.items()}
    e2e = {name: Retriever(st, embedder, settings) for name, st in stores.items()}
    scope = {"tenant": tenant}
    depth = settings.candidates

    def breakdown(store: Any, q: str) -> dict[str, float]:
        """The retriever's candidate path, stage by stage, on one query; next to it
        the previous path's fusion (the candidates as (id, score) pairs, fused by id
        in Python) on the same query."""
        qv = fast.embed_query(q)
        out: dict[str, float] = {}
        w = (settings.hybrid_vector_weight, settings.hybrid_keyword_weight)
        t0 = time.perf_counter()
        found = store.candidates(CandidateQuery(depth, qv, q, scope, settings.boosts, w, 10))
        ranked, ms = found.fused or [], found.ms
        t1 = time.perf_counter()
        out["store: candidates + weighted fusion (one call)"] = (t1 - t0) * 1000.0
        out["  of which vector alone"] = ms["vector"]
        out["  of which BM25 alone"] = ms["keyword"]
        out["  of which fusion on row positions (numpy)"] = ms["fusion"]
        to_hits(ranked[:10], store, qv)
        t2 = time.perf_counter()
        out["rows of the 10 hits (+ vectors) → Hit objects"] = (t2 - t1) * 1000.0
        both = store.candidates(CandidateQuery(depth, qv, q, scope, settings.boosts))
        vpairs, kpairs = both.vector, both.keyword
        t3 = time.perf_counter()
        fuse(vpairs, kpairs, "hybrid", settings, 10)
        out["previous path: fusion on (id, score) pairs (Python)"] = (
            time.perf_counter() - t3
        ) * 1000.0
        return out

    for q in warm:
        for name, r in retrievers.items():
            r.search(q, mode="hybrid")
            breakdown(stores[name], q)
        base.search(q, fast.embed_query(q))
        if peer is not None:
            peer.search(q, fast.embed_query)
            peer.search(q, embedder.embed_query)
    loads = [load_average()[0]]
    others = ["baseline", *(["txtai"] if peer is not None else [])]
    search_ms: dict[str, list[float]] = {n: [] for n in [*stores, *others]}
    e2e_ms: dict[str, list[float]] = {n: [] for n in [*stores, *others]}
    parts_ms: dict[str, dict[str, list[float]]] = {n: {} for n in stores}
    stages: dict[str, dict[str, list[float]]] = {n: {} for n in stores}
    overlap = dict.fromkeys([*stores, *others[1:]], 0)
    for i, q in enumerate(measured):
        qv = fast.embed_query(q)
        runs: list[tuple[str, Callable[[], Any]]] = [
            *((n, lambda q=q, r=r: r.search(q, mode="hybrid")) for n, r in retrievers.items()),
            ("baseline", lambda q=q, qv=qv: base.search(q, qv)),
        ]
        if peer is not None:
            runs.append(("txtai", lambda q=q: peer.search(q, fast.embed_query)))
        shift = i % len(runs)
        for name, fn in runs[shift:] + runs[:shift]:
            t0 = time.perf_counter()
            res = fn()
            search_ms[name].append((time.perf_counter() - t0) * 1000.0)
            if name in stages:
                for k, v in res.timings_ms.items():
                    stages[name].setdefault(k, []).append(v)
        top_b = {c.id for c, _ in base.search(q, qv)}
        for name, st in stores.items():
            for k, v in breakdown(st, q).items():
                parts_ms[name].setdefault(k, []).append(v)
            e2e_ms[name].append(timed(lambda q=q, name=name: e2e[name].search(q, mode="hybrid")))
            top_r = {h.chunk.id for h in retrievers[name].search(q, mode="hybrid").hits}
            overlap[name] += len(top_r & top_b)
        e2e_ms["baseline"].append(timed(lambda q=q: base.search(q, embedder.embed_query(q))))
        if peer is not None:
            e2e_ms["txtai"].append(timed(lambda q=q: peer.search(q, embedder.embed_query)))
            overlap["txtai"] += len({c.id for c in peer.search(q, fast.embed_query)} & top_b)
        if i % 50 == 0:
            loads.append(load_average()[0])
    loads.append(load_average()[0])
    for st in stores.values():
        st.close()

    def row(name: str, xs: list[float]) -> str:
        return f"| {name} | {pct(xs, 50):.2f} | {pct(xs, 95):.2f} |"

    def ratio(a: list[float], b: list[float]) -> float:
        return statistics.median(x / y for x, y in zip(a, b, strict=True))

    n = len(measured)
    lines = [
        "# Hybrid search profile: ragline against an in-memory baseline",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- index: {label} ({len(chunks):,} chunks, tenant "
        f"`{tenant}`), LanceStore; {n} queries after {len(warm)} warm-ups; "
        f"candidates {depth}, weighted fusion {settings.hybrid_vector_weight}/"
        f"{settings.hybrid_keyword_weight}, top_k 10",
        "- search only = precomputed query vectors; the three paths rotate their order per "
        "query, so load drift hits them alike",
        f"- the in-process mirror was built in {mirror_build_s:.1f} s (first search)"
        + (f"; txtai indexed in {txtai_build_s:.1f} s" if peer is not None else ""),
        "- top-10 overlap with the baseline: "
        + ", ".join(f"{k} {v / (10 * n):.2f}" for k, v in overlap.items())
        + " (the baseline's bm25s indexes title + text with its own analyser)",
        "",
        "| path | p50 ms | p95 ms |",
        "|---|---:|---:|",
        *(row(f"{k}, search only", v) for k, v in search_ms.items()),
        *(row(f"{k}, end to end", v) for k, v in e2e_ms.items()),
        "",
        "Median per-query ratio to the baseline (search only / end to end): "
        + "; ".join(
            f"{k} {ratio(search_ms[k], search_ms['baseline']):.2f} / "
            f"{ratio(e2e_ms[k], e2e_ms['baseline']):.2f}"
            for k in [*stores, *others[1:]]
        )
        + ".",
        "",
    ]
    for name in stores:
        lines += [
            f"## {name}: the search stage by stage (same queries, one more run each)",
            "",
            "| stage | p50 ms | p95 ms |",
            "|---|---:|---:|",
            *(row(k, v) for k, v in parts_ms[name].items()),
            "",
            f"`SearchResult.timings_ms` of the timed searches ({name}):",
            "",
            "| stage | p50 ms | p95 ms |",
            "|---|---:|---:|",
            *(row(k, v) for k, v in stages[name].items() if any(v)),
            "",
        ]
    text = "\n".join(lines)
    emit(text, args.out)
    print(f"loads: {loads}", file=sys.stderr)


if __name__ == "__main__":
    main()
