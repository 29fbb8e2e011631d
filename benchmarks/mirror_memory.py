r"""Memory and build time of LanceStore's in-process mirror (store/lance_memory.py).

Opens an existing LanceDB index, runs one hybrid candidate search (which builds the
mirror) and prints the build time, the process's peak RSS before and after, and the
bytes each part of the snapshot holds.

    python benchmarks/mirror_memory.py /tmp/prof/scale-100000
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from ragline.settings import Settings
from ragline.store.base import CandidateQuery
from ragline.store.factory import make_store


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index_dir", type=Path, help="RAGLINE_INDEX_DIR of the index")
    ap.add_argument("--searches", type=int, default=100, help="then time this many searches")
    args = ap.parse_args()
    settings = Settings().model_copy(update={"index_dir": args.index_dir})
    store = make_store(settings, 384)
    before = rss_mib()
    rows = store.info().chunks
    t0 = time.perf_counter()
    store.warm_up()  # type: ignore[attr-defined]
    built = time.perf_counter() - t0
    snap = store._mirror._snapshot  # type: ignore[attr-defined]
    kw = snap.keywords
    v = snap.vectors
    layout = " + ".join(
        name
        for name, a in (("float32", v.matrix), ("float16 units", v.units), ("int8 codes", v.codes))
        if a is not None
    )
    parts = {
        f"vectors ({layout})": snap.vectors.nbytes,
        "BM25 postings (3 fields)": sum(
            m.data.nbytes + m.indices.nbytes + m.indptr.nbytes for m in kw.tf
        ),
        "text and hash columns (Arrow, small tables)": (
            snap.texts.nbytes if snap.texts is not None else 0
        ),
        "held chunk columns": snap.held.nbytes if snap.held is not None else 0,
        "row ids + positions": snap.rowids.nbytes + snap.by_rowid.nbytes,
    }
    print(f"rows {rows:,}; mirror built in {built:.1f} s; vocabulary {len(kw.vocab):,} terms")
    print(f"peak RSS before {before:.0f} MiB, after the build {rss_mib():.0f} MiB")
    q = snap.vectors.units[0] if snap.vectors.units is not None else snap.vectors.raw([0])[0]
    t0 = time.perf_counter()
    store.candidates(CandidateQuery(200, q, "gradient of the loss"))
    print(
        f"first hybrid search {1e3 * (time.perf_counter() - t0):.1f} ms; "
        f"peak RSS after it {rss_mib():.0f} MiB"
    )
    for name, n in parts.items():
        print(f"  {name}: {n / 2**20:.0f} MiB")
    if args.searches:
        # the candidate stages alone, on distinct pseudo-queries cut from the rows
        every = np.arange(0, snap.rows, max(1, snap.rows // args.searches))
        chunks, _, _ = store._mirror.chunk_rows(snap, every)  # type: ignore[attr-defined]
        texts = [" ".join(c.text.split()[3:10]) for c in chunks]
        vec_ms, kw_ms = [], []
        rng = np.random.default_rng(0)
        for text in texts[: args.searches]:
            q = rng.standard_normal(snap.vectors.dimension).astype(np.float32)
            ms = store.candidates(CandidateQuery(200, q, text)).ms
            vec_ms.append(ms["vector"])
            kw_ms.append(ms["keyword"])
        for name, xs in (("vector", vec_ms), ("BM25", kw_ms)):
            print(
                f"{name} candidates (200), {len(xs)} searches: p50 {np.percentile(xs, 50):.2f} "
                f"ms, p95 {np.percentile(xs, 95):.2f} ms"
            )
        print(f"peak RSS after the searches {rss_mib():.0f} MiB")
    store.close()


if __name__ == "__main__":
    main()
