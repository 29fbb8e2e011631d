"""What the automatic choice of e5 costs: embedding throughput and query latency.

Chunks ``--pages`` of react.dev's Spanish pages (spread evenly over the sorted paths)
with the default settings, then, alternating the two models ``--rounds`` times on
the same texts: passages embedded per second (``embed_documents`` in the
configured batches) and the median time of one query embedding (the 20 Spanish
questions of ``benchmarks/data/languages_questions.jsonl``). Model loading is
excluded (one warm-up call each). The gain, hit@3 per model on the same pages, is
in ``benchmarks/results/languages.md``.

    PYTHONPATH=src python benchmarks/embedder_auto_cost.py --data ../shared/data \\
        --out benchmarks/results/embedder_auto_cost.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from ragline.embed.base import Embedder
from ragline.embed.factory import make_embedder
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import make_chunker
from ragline.ingest.parse import parse_file
from ragline.settings import Settings

QUESTIONS = Path(__file__).parent / "data" / "languages_questions.jsonl"


def passages(data: Path, n_pages: int, settings: Settings) -> list[str]:
    root = data / "react-docs" / "es"
    paths = sorted(root.rglob("*.md"))
    step = max(1, len(paths) // n_pages)
    chunker = make_chunker(settings, TokenCounter())
    out: list[str] = []
    for path in paths[::step][:n_pages]:
        doc = parse_file(path, path.read_bytes(), max_bytes=settings.max_file_bytes)
        out.extend(d.text for d in chunker.chunk(doc))
    return out


def measure(emb: Embedder, texts: list[str], queries: list[str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    emb.embed_documents(texts)
    rate = len(texts) / (time.perf_counter() - t0)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        emb.embed_query(q)
        times.append(time.perf_counter() - t0)
    return rate, 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--pages", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    settings = Settings()
    texts = passages(args.data, args.pages, settings)
    questions = [json.loads(line) for line in QUESTIONS.read_text("utf-8").splitlines()]
    queries = [q["question"] for q in questions if q["lang"] == "es"]
    models = {name: make_embedder(settings.with_embedder(name)) for name in ("onnx", "e5")}
    for emb in models.values():
        emb.embed_documents(texts[:8])
        emb.embed_query(queries[0])
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in models}
    load = []
    for _ in range(args.rounds):
        for name, emb in models.items():
            load.append(os.getloadavg()[0])
            results[name].append(measure(emb, texts, queries))
            print(name, results[name][-1], flush=True)
    rows = []
    for name, runs in results.items():
        rate = statistics.median(r[0] for r in runs)
        query_ms = statistics.median(r[1] for r in runs)
        rows.append((name, models[name].fingerprint.name, rate, query_ms))
    base = rows[0]
    lines = [
        "# The automatic embedder's cost: e5 vs MiniLM on react.dev's Spanish pages",
        "",
        f"- machine: `nproc` = {os.cpu_count()}, {platform.machine()}, shared; "
        f"1-min load average during the runs: {min(load):.1f}-{max(load):.1f}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- command: `PYTHONPATH=src python benchmarks/embedder_auto_cost.py --pages "
        f"{args.pages} --rounds {args.rounds}`",
        f"- data: {len(texts)} chunks of {args.pages} Spanish pages (default chunker), "
        f"{len(queries)} Spanish questions; median of {args.rounds} alternating rounds",
        "",
        "| model | fingerprint | passages / s | query embedding (median ms) |",
        "|---|---|---:|---:|",
    ]
    for name, fp, rate, query_ms in rows:
        lines.append(f"| {name} | {fp} | {rate:.1f} | {query_ms:.1f} |")
    e5 = rows[1]
    lines += [
        "",
        f"e5 embeds passages {base[2] / e5[2]:.1f}x slower and a query "
        f"{e5[3] / base[3]:.1f}x slower than MiniLM here.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
