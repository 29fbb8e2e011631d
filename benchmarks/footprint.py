r"""Peak memory and disk of ragline's embedded search next to the in-memory baseline
and txtai, on the same chunks and vectors (issue 13's side-by-side footprint).

Each system runs in a fresh process of its own: it imports its libraries, loads what
it searches, answers ``--searches`` hybrid searches and reports its peak RSS
(``ru_maxrss``) and the RSS it started from (Python and numpy), so a system's imports
count as its own. No process loads the embedding model: the queries are the first
words of sampled chunks, with those chunks' stored vectors (picked by this process
and handed to each child in a file).

* ragline: the LanceDB index opened as a server would (``make_store``, its
  in-process mirror built by the first search); disk = the index folder.
* baseline (profile_search.py's numpy exact cosine + bm25s + Python fusion): the
  chunks' titles, texts and vectors read from the LanceDB table, then indexed;
  disk = the vectors as ``.npy`` plus ``bm25s``'s saved index.
* txtai (``Embeddings`` hybrid, its defaults): the same read, then indexed; disk =
  ``Embeddings.save``.

The baseline and txtai read the table with LanceDB/Arrow first, which their peak
includes; ragline's includes LanceDB's own buffers.

    cd benchmarks; PYTHONPATH=../src:$TXTAI_SITE python footprint.py --cache-dir /tmp/evalcache \
        --label SciFact --txtai --out results/core_footprint.md
    python footprint.py /tmp/prof/scale-100000 --label 100k --txtai --out results/core_footprint.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from machine import PeakRss, command_line, dir_bytes, load_average, machine_lines

SYSTEMS = ("ragline", "baseline", "txtai")


def read_table(index_dir: Path, tenant: str) -> tuple[list[Any], np.ndarray]:
    """(chunks with ``id``, ``title`` and ``text``, their stored vectors) of one tenant."""
    import lancedb

    table = lancedb.connect(index_dir / "lance").open_table("chunks")
    rows = (
        table.search()
        .where(f"tenant = '{tenant}'")
        .select(["id", "title", "text", "vector"])
        .limit(None)
        .to_arrow()
    )
    col = rows.column("vector").combine_chunks()
    vectors = np.asarray(col.values.to_numpy(zero_copy_only=False), np.float32)
    vectors = vectors.reshape(len(col), -1)
    chunks = [
        SimpleNamespace(id=i, title=t or "", text=x or "")
        for i, t, x in zip(
            rows.column("id").to_pylist(),
            rows.column("title").to_pylist(),
            rows.column("text").to_pylist(),
            strict=True,
        )
    ]
    return chunks, vectors


def queries(chunks: list[Any], vectors: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """``n`` queries: the first eight words of sampled chunks, with their vectors."""
    out: dict[str, np.ndarray] = {}
    for i in np.random.default_rng(7).permutation(len(chunks)):
        words = chunks[int(i)].text.split()[:8]
        if len(words) >= 3:
            out.setdefault(" ".join(words), vectors[int(i)])
        if len(out) == n:
            break
    return out


class StoredVectors:
    """An embedder answering each query with a vector chosen beforehand."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed_query(self, text: str) -> np.ndarray:
        return self.vectors[text]


def load_queries(path: Path) -> dict[str, np.ndarray]:
    saved = np.load(path)
    return dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))


def searched(args: argparse.Namespace, qs: dict[str, np.ndarray]) -> Callable[[Path], Path]:
    """Build ``args.child``'s index and run the searches; returns what writes the
    index's files into a folder (after the peak is taken) and names what to measure."""
    if args.child == "ragline":
        from ragline.retrieve.retriever import Retriever
        from ragline.settings import Settings
        from ragline.store.factory import make_store

        settings = Settings().model_copy(
            update={"index_dir": args.index_dir, "tenant": args.tenant}
        )
        store = make_store(settings, 384)
        store.warm_up()  # type: ignore[attr-defined]  # the steady state: mirror built
        retriever = Retriever(store, StoredVectors(qs), settings)  # type: ignore[arg-type]
        for q in qs:
            retriever.search(q, mode="hybrid")
        return lambda _: args.index_dir / "lance"  # its files are already on disk
    chunks, vectors = read_table(args.index_dir, args.tenant)
    if args.child == "baseline":
        from profile_search import Baseline

        index = Baseline(chunks, vectors, 200, 0.4, 0.6)  # type: ignore[arg-type]
        del chunks, vectors
        for q, v in qs.items():
            index.search(q, v)

        def save_baseline(folder: Path) -> Path:
            np.save(folder / "vectors.npy", index.vectors)
            index.bm25.save(str(folder / "bm25s"))
            return folder

        return save_baseline
    from profile_search import Txtai

    peer = Txtai(chunks, vectors)  # type: ignore[arg-type]
    del chunks, vectors
    for q in qs:
        peer.search(q, qs.__getitem__)

    def save_txtai(folder: Path) -> Path:
        peer.embeddings.save(str(folder / "txtai"))
        return folder

    return save_txtai


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One system's footprint, in this (fresh) process: the start is Python and numpy,
    so each system's imports count as its own. The peak is the kernel's mark, reset
    when the block starts (``ru_maxrss`` would carry the parent's over the exec), and
    taken before the index is written out for its size."""
    qs = load_queries(args.queries_file)
    with PeakRss() as mem:
        save = searched(args, qs)
    with tempfile.TemporaryDirectory() as tmp:
        size = dir_bytes(save(Path(tmp)))
    mib = 2.0**20
    return {"start": mem.start / mib, "peak": mem.peak / mib, "how": mem.method, "disk": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index_dir", type=Path, nargs="?", help="RAGLINE_INDEX_DIR of a LanceDB index")
    ap.add_argument("--tenant", default="default")
    ap.add_argument("--cache-dir", type=Path, default=None, help="instead: ragline eval's cache")
    ap.add_argument("--label", default=None, help="the data's name in the table")
    ap.add_argument("--searches", type=int, default=50)
    ap.add_argument("--txtai", action="store_true", help="add txtai (PYTHONPATH holds it)")
    ap.add_argument("--child", choices=SYSTEMS, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help="append the result rows here")
    args = ap.parse_args()
    if args.cache_dir is not None:  # the SciFact index `ragline eval --cache-dir` built
        manifest = next(args.cache_dir.glob("*/eval-index.json"))
        args.index_dir = manifest.parent
        args.tenant = f"eval-{str(json.loads(manifest.read_text())['key'])[:16]}"
    if args.index_dir is None:
        ap.error("give an index folder or --cache-dir")
    if args.child is not None:
        print(json.dumps(child(args)))
        return
    loads = [load_average()[0]]
    here = Path(__file__).resolve().parent
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        chunks, vectors = read_table(args.index_dir, args.tenant)
        qs = queries(chunks, vectors, args.searches)
        del chunks, vectors
        saved = Path(tmp) / "queries.npz"
        np.savez(saved, texts=np.array(list(qs)), vectors=np.stack(list(qs.values())))
        for system in SYSTEMS if args.txtai else SYSTEMS[:2]:
            cmd = [sys.executable, str(here / "footprint.py"), str(args.index_dir), "--tenant"]
            cmd += [args.tenant, "--child", system, "--queries-file", str(saved)]
            env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
            done = subprocess.run(
                cmd, capture_output=True, text=True, cwd=here, env=env, check=True
            )
            got = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(
                f"| {args.label or args.index_dir.name} | {system} | {got['peak']:,.0f} | "
                f"{got['peak'] - got['start']:,.0f} | {got['disk'] / 2**20:,.1f} |"
            )
            loads.append(load_average()[0])
    lines = [
        "",
        f"- `{command_line()}`; {args.searches} hybrid searches a system; peak RSS: the "
        "kernel's mark (VmHWM) of each system's own process, reset after Python and numpy",
        "",
        "| data | system | peak RSS MiB | above the process's start MiB | disk MiB |",
        "|---|---|---:|---:|---:|",
        *rows,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        if not args.out.exists():
            head = [
                "# Footprint: ragline, the in-memory baseline and txtai",
                "",
                "Produced by `python benchmarks/footprint.py` (one section a run, appended; "
                "benchmarks/search_core_run.sh runs it per index; each section gives its "
                "exact command).",
                "",
                *machine_lines(loads),
            ]
            args.out.write_text("\n".join(head) + "\n", encoding="utf-8")
        with args.out.open("a", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
