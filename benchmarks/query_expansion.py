"""Keyword-side query preprocessing, measured: PRF expansion and the definition boost.

BM25 here is ragline's own (``ragline.store.bm25``: the analyser and scoring
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

    python benchmarks/query_expansion.py --out benchmarks/results/query_expansion.md
    python benchmarks/query_expansion.py --data scifact --variants none,definition
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import command_line, load_average, machine_lines
from ragline.embed.tokenizer import TokenCounter
from ragline.ingest.chunk.section import SectionChunker
from ragline.ingest.parse.markdown import parse_markdown
from ragline.retrieve.prf import defines, feedback_terms
from ragline.store.bm25 import FieldStats, FieldTerms, field_score, query_counts

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


def parse_variant(text: str) -> tuple[str, int, int]:
    """``none``, ``definition`` or ``prf-CHUNKS-TERMS`` as a variant tuple."""
    kind, *nums = text.strip().split("-")
    if kind in ("none", "definition") and not nums:
        return (kind, 0, 0)
    if kind == "prf" and len(nums) == 2 and all(n.isdigit() for n in nums):
        return (kind, int(nums[0]), int(nums[1]))
    raise SystemExit(f"--variants: unknown variant {text!r} (none, definition, prf-N-M)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--shared", type=Path, default=SHARED[0], help="the shared data folder")
    ap.add_argument("--data", choices=["d2l", "scifact", "both"], default="both")
    ap.add_argument(
        "--variants",
        default="none,prf-5-5,prf-10-10,definition",
        help="comma-separated: none, definition, prf-CHUNKS-TERMS",
    )
    args = ap.parse_args()
    SHARED[0] = args.shared
    loads = [load_average()[0]]
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
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
