"""Does ragline's reader improve the ranking as a reranker? SciFact train and the d2l set.

SciFact train (BEIR layout, the index ``ragline eval`` builds and caches): every
query is searched in four modes, one mode after the other, and scored with
ragline's eval metrics (ir-measures): ``hybrid-rrf``, ``hybrid-weighted`` (the
shipped default), and ``rrf_rerank`` with the heuristic reranker and with the
reader (``RAGLINE_RERANKER=reader``). nDCG@10 and Recall@100 are reported over
all claims, the even-id claims (the reader's training half: contaminated) and the
odd-id claims (held out of the reader's training; their documents were not).

The rerank modes run the product's own search call, ``rrf_rerank`` with
``top_k = rerank_depth`` (30): the reranker reorders the 30 best fused chunks,
exactly what ``ragline search`` does for any ``top_k`` up to 30. (``ragline eval
--modes rerank`` asks for ``top_k × RAGLINE_EVAL_CHUNK_DEPTH_FACTOR`` = 200 chunks,
and the retriever reranks ``max(rerank_depth, top_k)`` of them: a depth of 200,
not the one shipped.) For Recall@100 the documents of those 30 chunks are followed
by the rest of the query's ``hybrid-rrf`` ranking, in order.

d2l (an existing index, not re-ingested): the 54 questions of
``benchmarks/data/d2l_questions.jsonl``; a question counts at k when one of the
first k hits (``top_k`` = 5, no expansion) is a chunk of an expected section
(:func:`ragline.eval.distractor.in_expected`), split train/dev.

Latency: the wall time of each search call (query embedding included), after one
warm-up query per mode; medians from this one run.

Run: python benchmarks/reader_rerank.py [--scifact DIR] [--d2l-index DIR] [--limit N]
Writes benchmarks/results/reader_rerank.md (and benchmarks/.work/reader_rerank.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragline.embed.factory import make_embedder
from ragline.engine import Ragline
from ragline.eval.beir import load_beir
from ragline.eval.distractor import in_expected
from ragline.eval.index import open_eval_index
from ragline.eval.machine import Phase, load_average, machine_lines
from ragline.eval.runs import (
    Ranking,
    documents_of,
    evaluate,
    per_query,
    retrieval_settings,
    retriever_for,
)
from ragline.retrieve.retriever import MAX_TOP_K, Retriever
from ragline.settings import Settings
from ragline.types import SearchResult

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "benchmarks" / ".work"
SHARED = Path(os.environ.get("RAGLINE_SHARED_DATA", REPO.parent / "shared" / "data"))
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")

TOP_K = 100  # documents ranked per SciFact query (Recall@100)
D2L_TOP_K = 5


@dataclass(slots=True)
class ModeRun:
    name: str
    ranking: Ranking = field(default_factory=dict)
    ms: list[float] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    others_share: float = 0.0
    wall_s: float = 0.0


def searcher(retriever: Retriever, top_k: int) -> Callable[[str], SearchResult]:
    """A hybrid search of ``top_k`` chunks without expansion."""

    def search(query: str) -> SearchResult:
        return retriever.search(query, mode="hybrid", top_k=top_k, expand=0)

    return search


def timed_loop(
    name: str,
    items: list[tuple[str, str]],
    search: Callable[[str], SearchResult],
    keep: Callable[[str, SearchResult], None],
) -> ModeRun:
    """``search`` every item (after one warm-up), its wall time per call."""
    run = ModeRun(name)
    if items:
        search(items[0][1])  # warm-up: model loads, caches
    run.loads.append(load_average()[0])
    with Phase() as phase:
        for i, (qid, text) in enumerate(items, start=1):
            t0 = time.perf_counter()
            result = search(text)
            run.ms.append((time.perf_counter() - t0) * 1000.0)
            keep(qid, result)
            if i % 50 == 0:
                run.loads.append(load_average()[0])
                print(f"  {name}: {i}/{len(items)}", file=sys.stderr, flush=True)
    run.loads.append(load_average()[0])
    run.others_share = phase.others_share
    run.wall_s = phase.wall
    return run


def scifact(root: Path, settings: Settings, limit: int | None) -> dict[str, Any]:
    dataset = load_beir(root, "train")
    queries = list(dataset.queries.items())[:limit] if limit else list(dataset.queries.items())
    qrels = {q: dataset.qrels[q] for q, _ in queries if q in dataset.qrels}
    index = open_eval_index(
        list(dataset.corpus.values()),
        dataset.corpus_hash,
        root.name,
        settings,
        make_embedder(settings),
    )
    print(
        f"scifact index: {index.documents} documents, {index.chunks} chunks, reused={index.reused}",
        file=sys.stderr,
    )
    rag = index.rag
    s = rag.settings
    chunk_k = min(MAX_TOP_K, max(TOP_K, math.ceil(TOP_K * s.eval_chunk_depth_factor)))
    depth = s.rerank_depth
    runs: list[ModeRun] = []

    def ranked(run: ModeRun) -> Callable[[str, SearchResult], None]:
        def keep(qid: str, result: SearchResult) -> None:
            run.ranking[qid] = [d for d, _ in documents_of(result.hits, index.doc_of)[:TOP_K]]

        return keep

    for mode in ("hybrid-rrf", "hybrid-weighted"):
        retriever = retriever_for(mode, rag.store, rag.embedder, s)
        print(f"scifact {mode}", file=sys.stderr, flush=True)
        holder = ModeRun(mode)
        run = timed_loop(
            mode,
            queries,
            searcher(retriever, chunk_k),
            ranked(holder),
        )
        run.ranking = holder.ranking
        runs.append(run)
    rrf = runs[0].ranking

    # the reranker as RAGLINE_RERANKER picks it (make_reranker): heuristic, then reader
    for name, reranker_name in (
        ("rrf_rerank heuristic", "heuristic"),
        ("rrf_rerank reader", "reader"),
    ):
        rs = s.model_copy(update={"reranker": reranker_name})
        retriever = retriever_for("rerank", rag.store, rag.embedder, rs)
        holder = ModeRun(name)

        def keep(qid: str, result: SearchResult, holder: ModeRun = holder) -> None:
            head = [d for d, _ in documents_of(result.hits, index.doc_of)]
            tail = [d for d in rrf.get(qid, []) if d not in set(head)]
            holder.ranking[qid] = (head + tail)[:TOP_K]

        print(f"scifact {name}", file=sys.stderr, flush=True)
        run = timed_loop(
            name,
            queries,
            searcher(retriever, depth),
            keep,
        )
        run.ranking = holder.ranking
        runs.append(run)
    settings_used = retrieval_settings(s)
    index.close()

    halves = {
        "all": qrels,
        "even": {q: r for q, r in qrels.items() if int(q) % 2 == 0},
        "odd": {q: r for q, r in qrels.items() if int(q) % 2 == 1},
    }
    base = per_query(qrels, rrf)
    rows = []
    for run in runs:
        scores = {h: evaluate(sub, run.ranking) for h, sub in halves.items()}
        pq = per_query(qrels, run.ranking)
        vs = {
            h: (
                sum(pq[q] > base[q] + 1e-9 for q in sub),
                sum(pq[q] < base[q] - 1e-9 for q in sub),
            )
            for h, sub in halves.items()
        }
        rows.append(
            {
                "mode": run.name,
                "ndcg@10": {h: v["ndcg@10"] for h, v in scores.items()},
                "recall@100": {h: v["recall@100"] for h, v in scores.items()},
                "vs_rrf": vs,
                "p50_ms": statistics.median(run.ms),
                "p95_ms": sorted(run.ms)[int(0.95 * (len(run.ms) - 1))],
                "loads": run.loads,
                "others_share": run.others_share,
                "wall_s": run.wall_s,
            }
        )
    return {
        "queries": {h: len(v) for h, v in halves.items()},
        "documents": index.documents,
        "chunks": index.chunks,
        "index_reused": index.reused,
        "chunk_k": chunk_k,
        "rerank_depth": depth,
        "settings": settings_used,
        "odd_docs_seen": odd_docs_seen(root, halves["odd"]),
        "rows": rows,
    }


def odd_docs_seen(root: Path, odd: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """How many odd-id (held-out) claims have a relevant document that the reader saw in
    training as the passage of an even-id claim (its evidence or a cited document)."""
    seen: set[str] = set()
    path = root / "claims" / "claims_train.jsonl"
    if not path.is_file():
        return {}
    for line in path.read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        if int(c["id"]) % 2 == 0:
            seen.update(str(d) for d in c["evidence"])
            seen.update(str(d) for d in c.get("cited_doc_ids", []))
    hit = sum(any(d in seen for d, rel in r.items() if rel > 0) for r in odd.values())
    return {"odd_claims": len(odd), "with_a_seen_relevant_doc": hit}


def d2l(index_dir: Path, questions_path: Path) -> dict[str, Any]:
    questions = [json.loads(x) for x in questions_path.read_text().splitlines() if x.strip()]
    rag = Ragline(Settings(index_dir=index_dir))
    rag.search("warm-up", top_k=1, expand=0)  # checks the index's model
    s = rag.settings
    configs: list[tuple[str, Retriever]] = [
        ("hybrid weighted (default)", retriever_for("hybrid-weighted", rag.store, rag.embedder, s)),
        ("hybrid rrf", retriever_for("hybrid-rrf", rag.store, rag.embedder, s)),
        ("rrf_rerank heuristic", retriever_for("rerank", rag.store, rag.embedder, s)),
        (
            "rrf_rerank reader",
            retriever_for(
                "rerank", rag.store, rag.embedder, s.model_copy(update={"reranker": "reader"})
            ),
        ),
    ]
    by_id = {q["id"]: q for q in questions}
    items = [(q["id"], q["question"]) for q in questions]
    rows = []
    for name, retriever in configs:
        found: dict[str, list[bool]] = {}

        def keep(qid: str, result: SearchResult, found: dict[str, list[bool]] = found) -> None:
            exp = by_id[qid]["expected"]
            found[qid] = [in_expected(h.chunk.source, h.chunk.section, exp) for h in result.hits]

        print(f"d2l {name}", file=sys.stderr, flush=True)
        run = timed_loop(
            name,
            items,
            searcher(retriever, D2L_TOP_K),
            keep,
        )
        split_scores: dict[str, dict[str, float]] = {}
        for split in ("train", "dev", "all"):
            ids = [q["id"] for q in questions if split == "all" or q["split"] == split]
            split_scores[split] = {
                "n": len(ids),
                "top1": sum(any(found[i][:1]) for i in ids) / len(ids),
                "top5": sum(any(found[i][:5]) for i in ids) / len(ids),
            }
        rows.append(
            {
                "mode": name,
                "scores": split_scores,
                "p50_ms": statistics.median(run.ms),
                "loads": run.loads,
                "others_share": run.others_share,
            }
        )
    settings_used = retrieval_settings(s)
    chunks = rag.store.info(None).chunks
    rag.close()
    return {"rows": rows, "settings": settings_used, "chunks": chunks}


def markdown(
    sf: dict[str, Any] | None,
    dl: dict[str, Any] | None,
    args: argparse.Namespace,
    command: str,
    loads: list[float],
) -> str:
    lines = [
        "# The reader as a reranker: SciFact train and the d2l questions",
        "",
        *machine_lines(loads),
        f"- command: `{command}`",
        "- script: `benchmarks/reader_rerank.py` (its docstring has the protocol); "
        "everything below comes from this one run, the modes one after the other",
        "",
    ]
    if sf is not None:
        q = sf["queries"]
        st = sf["settings"]
        seen = sf["odd_docs_seen"]
        lines += [
            "## SciFact train",
            "",
            f"- data: `{args.scifact}` (BEIR layout: {sf['documents']:,} abstracts → "
            f"{sf['chunks']:,} chunks; {q['all']} judged claims: {q['even']} even id, "
            f"{q['odd']} odd id); the `ragline eval` index cache "
            f"({'reused' if sf['index_reused'] else 'built by this run'})",
            "- settings: the defaults (no `RAGLINE_*` set; the reader mode is the defaults "
            "with `reranker` = `reader`, what `RAGLINE_RERANKER=reader` sets) — "
            f"candidates {st['candidates']}, rrf_k {st['rrf_k']}, weighted "
            f"{st['hybrid_vector_weight']}/{st['hybrid_keyword_weight']}, boosts title "
            f"{st['boost_title']} / headings {st['boost_headings']} / text {st['boost_text']}, "
            f"chunker {st['chunker']} ({st['chunk_max_tokens']} tokens), rerank depth "
            f"{sf['rerank_depth']}; {sf['chunk_k']} chunks asked per query in the hybrid "
            "modes, merged into documents (a document in its best chunk's place), 100 ranked",
            "- rerank modes: `rrf_rerank` with `top_k` = the rerank depth (the 30 best fused "
            "chunks reordered, as `ragline search` does); for Recall@100 the rest of the "
            "query's hybrid-rrf ranking follows them",
            "- contamination: the reader was trained on the even-id claims of this very set "
            "(training/reader_data.py: their evidence abstracts as positives, cited and "
            "similar abstracts as negatives). The odd-id claims were held out, but not their "
            f"documents: at least {seen.get('with_a_seen_relevant_doc', '?')} of "
            f"{seen.get('odd_claims', '?')} odd claims have a relevant abstract that the "
            "reader read in training for an even claim (as its evidence or a cited abstract; "
            "the similar-abstract negatives are not counted). **Only the odd column is a "
            "fair measure of the reader, and even it is not fully clean.**",
            "",
            "| mode | nDCG@10 all | even (trained) | odd (held out) | R@100 all | even | odd "
            "| odd: better / worse than rrf | p50 ms/query | p95 ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in sf["rows"]:
            n, rc = r["ndcg@10"], r["recall@100"]
            better, worse = r["vs_rrf"]["odd"]
            vs = "—" if r["mode"] == "hybrid-rrf" else f"{better} / {worse}"
            lines.append(
                f"| {r['mode']} | {n['all']:.4f} | {n['even']:.4f} | **{n['odd']:.4f}** | "
                f"{rc['all']:.4f} | {rc['even']:.4f} | {rc['odd']:.4f} | {vs} | "
                f"{r['p50_ms']:.1f} | {r['p95_ms']:.1f} |"
            )
        lines += [
            "",
            "Per mode: wall time, 1-min load at the start/end, and the share of the two "
            "cores other processes used meanwhile:",
            "",
        ]
        for r in sf["rows"]:
            lines.append(
                f"- {r['mode']}: {r['wall_s']:.0f} s, load {r['loads'][0]:.2f} → "
                f"{r['loads'][-1]:.2f}, others {r['others_share']:.0%}"
            )
        lines.append("")
    if dl is not None:
        lines += [
            "## d2l questions",
            "",
            f"- data: `{args.d2l_questions.relative_to(REPO)}` "
            f"({dl['rows'][0]['scores']['train']['n']} train, "
            f"{dl['rows'][0]['scores']['dev']['n']} dev questions) over the existing index "
            f"`{args.d2l_index}` of d2l-en ({dl['chunks']:,} chunks; default settings, "
            "not re-ingested)",
            f"- a question counts at k when one of its first k hits (search `top_k` = "
            f"{D2L_TOP_K}, hybrid, no expansion) is a chunk of an expected file + section; "
            "rerank modes: `rrf_rerank`, the reranker reorders the 30 best fused chunks",
            "- the reader never saw d2l in training (SQuAD 2.0, QNLI, SciFact)",
            "",
            "| mode | top 1 train | top 1 dev | top 5 train | top 5 dev | top 1 all | "
            "top 5 all | p50 ms/query |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in dl["rows"]:
            sc = r["scores"]

            def cell(split: str, k: str, sc: dict[str, Any] = sc) -> str:
                v = sc[split]
                return f"{round(v[k] * v['n'])}/{v['n']} ({v[k]:.0%})"

            lines.append(
                f"| {r['mode']} | {cell('train', 'top1')} | {cell('dev', 'top1')} | "
                f"{cell('train', 'top5')} | {cell('dev', 'top5')} | {cell('all', 'top1')} | "
                f"{cell('all', 'top5')} | {r['p50_ms']:.1f} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scifact", type=Path, default=SHARED / "scifact")
    ap.add_argument("--d2l-index", type=Path, default=Path("/tmp/d2l-index"))
    ap.add_argument(
        "--d2l-questions", type=Path, default=REPO / "benchmarks/data/d2l_questions.jsonl"
    )
    ap.add_argument("--limit", type=int, default=None, help="first N SciFact queries only")
    ap.add_argument("--skip-scifact", action="store_true")
    ap.add_argument("--skip-d2l", action="store_true")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/reader_rerank.md")
    args = ap.parse_args()
    set_env = sorted(
        k for k in os.environ if k.startswith("RAGLINE_") and k != "RAGLINE_SHARED_DATA"
    )
    if set_env:
        sys.exit(f"unset {', '.join(set_env)}: this benchmark runs with the defaults")
    command = shlex.join(["python", "benchmarks/reader_rerank.py", *sys.argv[1:]])
    loads = [load_average()[0]]
    sf = None if args.skip_scifact else scifact(args.scifact, Settings(), args.limit)
    loads.append(load_average()[0])
    dl = None if args.skip_d2l else d2l(args.d2l_index, args.d2l_questions)
    loads.append(load_average()[0])
    if sf is not None:
        for r in sf["rows"]:
            loads += r["loads"]
    if dl is not None:
        for r in dl["rows"]:
            loads += r["loads"]
    text = markdown(sf, dl, args, command, loads)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "reader_rerank.json").write_text(json.dumps({"scifact": sf, "d2l": dl}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
