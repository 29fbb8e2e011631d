r"""The int8 vector scan of LanceStore's mirror: which codes, how many candidates to
re-score, and from how many rows it beats the float32 product.

For each quantisation scheme (per-row scale, one global scale from the data's
largest component, the fixed scale 127) and candidate depth R, the exact top-200
(float32 cosine) is compared with the top-200 after scanning the int8 codes
(simsimd dot products), taking the best R and re-scoring them exactly; then
``VectorIndex.search`` is timed with float32 only and with int8 + rerank (paths
alternating query by query) on the first N rows for several N.

    python benchmarks/int8_scan.py /tmp/i13/evalcache/<key>/lance --beir /work/shared/data/scifact
    python benchmarks/int8_scan.py /tmp/prof/scale-100000/lance --pool /tmp/prof/pool
    python benchmarks/int8_scan.py /tmp/d2l/lance --questions benchmarks/data/d2l_questions.jsonl

(the LanceDB folder of an index; queries: a BEIR split's, the ``question`` of each
line of a JSONL file, or pseudo-queries cut from a pool index's chunks).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import lancedb
import numpy as np
import simsimd

from benchlib import emit
from machine import command_line, load_average, machine_lines
from ragline.embed.factory import make_embedder
from ragline.settings import Settings
from ragline.store.vector_index import VectorIndex, VectorLayout, quantise

K = 200


def stored_vectors(lance_dir: Path) -> np.ndarray:
    table = lancedb.connect(lance_dir).open_table("chunks")
    col = table.search().select(["vector"]).limit(None).to_arrow().column("vector")
    flat = col.combine_chunks().values.to_numpy(zero_copy_only=False)
    return np.asarray(flat, np.float32).reshape(len(col), -1)


def query_texts(args: argparse.Namespace) -> list[str]:
    if args.questions is not None:
        lines = args.questions.read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["question"] for line in lines if line.strip()][: args.queries]
    if args.beir is not None:
        from ragline.eval.beir import load_beir

        return list(load_beir(args.beir, "train").queries.values())[: args.queries]
    from ragline.eval.synthetic import Window, pseudo_queries
    from ragline.store.factory import make_store

    store = make_store(Settings().model_copy(update={"index_dir": args.pool}), 384)
    pool = [Window(c.title, c.chapter, c.text) for cs, _ in store.iter_chunks(1024) for c in cs]
    store.close()
    return pseudo_queries(pool, args.queries, 7)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lance_dir", type=Path)
    ap.add_argument("--beir", type=Path, default=None, help="a BEIR folder (train queries)")
    ap.add_argument("--questions", type=Path, default=None, help="a JSONL file of questions")
    ap.add_argument("--pool", type=Path, default=None, help="a pool index for pseudo-queries")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    loads = [load_average()[0]]
    v = stored_vectors(args.lance_dir)
    units = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    embedder = make_embedder(Settings())
    qs = np.stack([embedder.embed_query(t) for t in query_texts(args)])
    peak = float(np.abs(units).max())
    row_codes, row_steps = quantise(units)
    schemes = {
        "per-row scale (chosen)": (row_codes, row_steps, None),
        "global scale (data max)": (
            np.rint(units * (127 / peak)).astype(np.int8),
            None,
            127 / peak,
        ),
        "fixed scale 127": (np.rint(units * 127).astype(np.int8), None, 127.0),
    }
    exact = [np.argsort(-(units @ q), kind="stable")[:K] for q in qs]
    lines = [
        f"- command: `{command_line()}`",
        f"- {len(v):,} stored vectors × {v.shape[1]}, {len(qs)} queries; exact = float32 cosine",
        "",
        "| scheme | R | recall@200 min | mean | queries with the identical ranked top-200 |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (codes, steps, scale) in schemes.items():
        for r in (200, 250, 300, 400):
            recalls, same = [], 0
            for q, want in zip(qs, exact, strict=True):
                q8 = quantise(q[None, :])[0] if scale is None else np.rint(q * scale)[None, :]
                d = np.asarray(
                    simsimd.cdist(q8.astype(np.int8), codes, metric="dot", out_dtype="float32")
                ).reshape(-1)
                if steps is not None:
                    d *= steps
                cand = np.argpartition(-d, r)[:r] if r < len(d) else np.arange(len(d))
                got = cand[np.argsort(-(units[cand] @ q), kind="stable")][:K]
                recalls.append(len(set(got.tolist()) & set(want.tolist())) / K)
                same += got.tolist() == want.tolist()
            lines.append(
                f"| {name} | {r} | {min(recalls):.3f} | {np.mean(recalls):.4f} | {same}/{len(qs)} |"
            )
    lines += [
        "",
        "`VectorIndex.search` (k = 200), float32 product vs int8 codes + exact rerank "
        "(R = 2k), alternating per query:",
        "",
        "| rows | float32 p50 / p95 ms | int8 + rerank p50 / p95 ms | identical top-200 |",
        "|---:|---:|---:|---:|",
    ]
    for n in sorted({min(len(v), x) for x in (10_000, 20_000, 50_000, 100_000, len(v))}):
        f32 = VectorIndex.of(v[:n], VectorLayout(True, False))
        i8 = VectorIndex.of(v[:n], VectorLayout(True, True, 2))
        times: dict[int, list[float]] = {0: [], 1: []}
        same = 0
        for i, q in enumerate(qs[:200]):
            order = [(0, f32), (1, i8)] if i % 2 else [(1, i8), (0, f32)]
            got = {}
            for key, index in order:
                t0 = time.perf_counter()
                got[key] = index.search(q, K, None)[0]
                times[key].append((time.perf_counter() - t0) * 1000.0)
            same += got[0].tolist() == got[1].tolist()
        a, b = np.asarray(times[0]), np.asarray(times[1])
        lines.append(
            f"| {n:,} | {np.percentile(a, 50):.2f} / {np.percentile(a, 95):.2f} | "
            f"{np.percentile(b, 50):.2f} / {np.percentile(b, 95):.2f} | {same}/{len(a)} |"
        )
    loads.append(load_average()[0])
    head = ["# The int8 vector scan: recall and speed", "", *machine_lines(loads)]
    text = "\n".join([*head, *lines]) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
