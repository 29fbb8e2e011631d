"""Paired A/B: LanceStore with its in-process mirror against LanceDB's own queries.

``Retriever`` on a LanceStore ranks candidates from in-process indexes mirrored
from the table (``RAGLINE_LANCE_MEMORY_INDEX=true``, the default; see
``store/lance_memory.py``); ``false`` runs LanceDB's vector and full-text queries
instead. (Until issue 13 this script compared id-first candidates with whole-chunk
searches; the retriever now has only the id-first path.) On a shared machine the
load drifts between two separate runs, so this script times both on the same index
in one run, query by query, alternating which goes first: drift hits both alike and
the per-query ratio is robust.

The index is the synthetic corpus of ``ragline bench`` (``ragline.eval.synthetic``)
over the chunks of ``--path``; queries are its pseudo-queries; search only
(precomputed query vectors), top_k 10, default settings.

Run: python benchmarks/candidate_ab.py [--path DIR] [--scale 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from machine import Phase, command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.engine import Ragline
from ragline.eval.synthetic import (
    PrecomputedEmbedder,
    Synthetic,
    Window,
    build_index,
    pseudo_queries,
)
from ragline.retrieve.retriever import Retriever, SearchMode
from ragline.settings import Settings
from ragline.store.factory import make_store

DEFAULT_PATH = Path("/work/shared/data/d2l-en/chapter_appendix-mathematics-for-deep-learning")
MODES: tuple[SearchMode, ...] = ("bm25", "vector", "hybrid")


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--path", type=Path, default=DEFAULT_PATH, help="folder to ingest (pool)")
    ap.add_argument("--scale", type=int, default=100_000, help="synthetic index rows")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still remove the temp folder

    settings = Settings()
    embedder = make_embedder(settings)
    loads = [load_average()[0]]
    with tempfile.TemporaryDirectory(prefix="ragline-ab-") as tmp_name:
        tmp = Path(tmp_name)
        rag = Ragline(settings.model_copy(update={"index_dir": tmp / "ingest"}), embedder=embedder)
        try:
            rag.ingest(args.path)
            windows: list[Window] = []
            parts = []
            for chunks, vectors in rag.store.iter_chunks(1024):
                windows += [Window(c.title, c.chapter, c.text) for c in chunks]
                parts.append(vectors)
        finally:
            rag.close()
        order = np.random.default_rng(args.seed).permutation(len(windows))
        pool = [windows[i] for i in order]
        data = Synthetic(pool, np.concatenate(parts)[order], 0.03, args.seed)
        queries = pseudo_queries(pool, args.warmup + args.queries, args.seed)
        warm, measured = queries[: args.warmup], queries[args.warmup :]
        fast_embedder = PrecomputedEmbedder(embedder, queries)

        s = settings.model_copy(update={"index_dir": tmp / "scale"})
        store = make_store(s, embedder.dimension)
        t0 = time.perf_counter()
        build_index(store, data, args.scale, 2000, embedder.fingerprint, s.tenant)
        built = time.perf_counter() - t0
        new = Retriever(store, fast_embedder, s)
        plain = make_store(s.model_copy(update={"lance_memory_index": False}), embedder.dimension)
        old = Retriever(plain, fast_embedder, s)
        rows = []
        for mode in MODES:
            for q in warm:
                new.search(q, mode=mode)
                old.search(q, mode=mode)
            t_new: list[float] = []
            t_old: list[float] = []
            with Phase() as phase:
                for i, q in enumerate(measured):
                    pair = (new, old) if i % 2 == 0 else (old, new)
                    for r in pair:
                        ms = r.search(q, mode=mode).timings_ms["total"]
                        (t_new if r is new else t_old).append(ms)
            loads.append(load_average()[0])
            ratio = statistics.median(a / b for a, b in zip(t_new, t_old, strict=True))
            rows.append(
                f"| {mode} | {pct(t_old, 50):.1f} / {pct(t_old, 95):.1f} "
                f"| {pct(t_new, 50):.1f} / {pct(t_new, 95):.1f} | {ratio:.2f} "
                f"| {100 * phase.others_share:.0f} % |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
        store.close()
        plain.close()

    text = "\n".join(
        [
            "# LanceStore: in-process mirror vs LanceDB's own queries (paired A/B)",
            "",
            *machine_lines(loads),
            f"- command: `{command_line()}`",
            f"- index: {args.scale:,} synthetic chunks (`ragline.eval.synthetic`) over the "
            f"{len(pool)} chunks of {args.path}, built in {built:.0f} s; LanceStore, default "
            f"settings (candidates {settings.candidates}, merge {settings.hybrid_merge_method})",
            f"- {len(measured)} pseudo-queries per mode after {len(warm)} warm-up, search only "
            "(precomputed query vectors), top_k 10; the two paths alternate per query",
            "",
            "| mode | LanceDB queries p50 / p95 (ms) | mirror p50 / p95 (ms) "
            "| median per-query ratio (new / old) | others' CPU |",
            "|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
