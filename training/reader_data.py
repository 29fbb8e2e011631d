"""Build the reader's training and test pairs from ../shared/data (never copied into the repo).

A pair is (question or claim, passage) with a label: does the passage answer or support
it? SQuAD 2.0 pairs also carry the answer's character offset, so the reader learns where
the answer is as well as whether there is one. Negatives, by how hard they are:

* SQuAD 2.0's unanswerable questions against their own paragraph (written to look answerable);
* **constraint swaps**: an answerable question's paragraph with the number, year or name
  that the question also names replaced by another one of the article (the passage still
  reads on topic but no longer meets the question's constraint);
* the article's other paragraphs, the most word-similar first (topical distractors);
* QNLI's sentences of the same paragraph that do not answer;
* SciFact claims against abstracts the claim cites without evidence, and against the
  abstracts most word-similar to the claim.

Held out for the test split: whole SQuAD articles (every 4th), the QNLI pairs whose
sentence stands in a held-out article, and the SciFact claims of odd id.

    python training/reader_data.py --shared ../shared/data --out training/pairs.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

WORD = re.compile(r"\w+", re.UNICODE)
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "from",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "did",
        "does",
        "do",
        "that",
        "this",
        "these",
        "those",
        "as",
        "it",
        "its",
        "into",
        "than",
    ]
)


def words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


def held_out_article(index: int) -> bool:
    """Every 4th SQuAD article is the test split (questions share their article's paragraphs)."""
    return index % 4 == 3


def overlap(a: list[str], b: list[str]) -> float:
    """Word-set cosine: how topical a distractor paragraph is for a question."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / math.sqrt(len(sa) * len(sb)) if sa and sb else 0.0


def swap_constraint(
    question: str, context: str, answer_start: int, answer: str, pool: list[str], rng: random.Random
) -> str | None:
    """``context`` with a number, year or name that the question names (outside the answer)
    replaced everywhere by another one: on topic, but no longer an answer to the question."""
    lo, hi = answer_start, answer_start + len(answer)
    options: list[tuple[str, str]] = []
    for m in NUMBER.finditer(question):
        value = m.group()
        spots = [
            x for x in re.finditer(re.escape(value), context) if x.end() <= lo or x.start() >= hi
        ]
        if spots and value not in answer:
            options.append((value, _other_number(value, rng)))
    q_first = question.split(" ", 1)[0]
    for m in NAME.finditer(question):
        value = m.group()
        if value == q_first or value in answer:
            continue
        if re.search(rf"\b{value}\b", context):
            others = [p for p in pool if p != value and p not in question and p not in answer]
            if others:
                options.append((value, rng.choice(others)))
    if not options:
        return None
    value, other = rng.choice(options)
    return re.sub(rf"(?<![\w]){re.escape(value)}(?![\w])", other, context)


def _other_number(value: str, rng: random.Random) -> str:
    digits = value.replace(",", "")
    try:
        n = float(digits)
    except ValueError:
        return value + "1"
    if "." not in digits and 1000 <= n <= 2100:
        return str(int(n) + rng.choice([-1, 1]) * rng.randint(2, 40))
    shifted = n * rng.choice([0.5, 2, 3, 0.25, 10]) + rng.choice([0, 1, 7])
    return str(int(shifted)) if "." not in digits else f"{shifted:.{len(digits.split('.')[1])}f}"


def squad_pairs(
    path: Path, rng: random.Random, distractors: int = 2
) -> Iterator[dict[str, object]]:
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    for index, article in enumerate(data):
        split = "test" if held_out_article(index) else "train"
        paragraphs = [p["context"] for p in article["paragraphs"]]
        para_words = [words(p) for p in paragraphs]
        names = sorted({n for p in paragraphs for n in NAME.findall(p)})
        for pi, para in enumerate(article["paragraphs"]):
            for qa in para["qas"]:
                q = qa["question"].strip()
                row = {"q": q, "split": split, "article": article["title"]}
                if qa["is_impossible"]:
                    yield {
                        **row,
                        "p": para["context"],
                        "label": 0,
                        "start": -1,
                        "answer": "",
                        "source": "squad-impossible",
                    }
                else:
                    ans = qa["answers"][0]
                    yield {
                        **row,
                        "p": para["context"],
                        "label": 1,
                        "start": ans["answer_start"],
                        "answer": ans["text"],
                        "source": "squad",
                    }
                    swapped = swap_constraint(
                        q, para["context"], ans["answer_start"], ans["text"], names, rng
                    )
                    if swapped is not None and swapped != para["context"]:
                        yield {
                            **row,
                            "p": swapped,
                            "label": 0,
                            "start": -1,
                            "answer": "",
                            "source": "squad-swap",
                        }
                qw = words(q)
                ranked = sorted(
                    (j for j in range(len(paragraphs)) if j != pi),
                    key=lambda j: -overlap(qw, para_words[j]),
                )
                picks = ranked[: distractors - 1] + rng.sample(ranked[distractors - 1 :], 1)
                for j in picks:
                    # An answerable question's answer can stand in another paragraph too.
                    if not qa["is_impossible"] and qa["answers"][0]["text"] in paragraphs[j]:
                        continue
                    yield {
                        **row,
                        "p": paragraphs[j],
                        "label": 0,
                        "start": -1,
                        "answer": "",
                        "source": "squad-distractor",
                    }


def qnli_pairs(path: Path, held_out_text: str) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8", newline="") as f:
        for rec in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            split = "test" if rec["sentence"][:80] in held_out_text else "train"
            yield {
                "q": rec["question"],
                "p": rec["sentence"],
                "split": split,
                "label": int(rec["label"] == "entailment"),
                "start": -1,
                "answer": "",
                "source": "qnli",
                "spanless": True,
            }


def scifact_pairs(folder: Path, rng: random.Random, hard: int = 2) -> Iterator[dict[str, object]]:
    corpus = {}
    for line in (folder / "corpus.jsonl").open(encoding="utf-8"):
        d = json.loads(line)
        corpus[int(d["_id"])] = f"{d['title']}. {d['text']}"
    ids = list(corpus)
    df: Counter[str] = Counter()
    doc_words = {i: set(words(corpus[i])) for i in ids}
    for ws in doc_words.values():
        df.update(ws)
    n = len(ids)

    def similar(claim: str, k: int, skip: set[int]) -> list[int]:
        cw = set(words(claim))
        score = {i: sum(math.log(n / df[w]) for w in cw & doc_words[i]) for i in ids}
        return [i for i in sorted(ids, key=lambda i: -score[i]) if i not in skip][:k]

    for line in (folder / "claims" / "claims_train.jsonl").open(encoding="utf-8"):
        c = json.loads(line)
        split = "test" if c["id"] % 2 else "train"
        evidence = {int(d) for d in c["evidence"]}
        row = {"q": c["claim"], "split": split, "start": -1, "answer": "", "spanless": True}
        for d in evidence:
            yield {**row, "p": corpus[d], "label": 1, "source": "scifact"}
        for d in c["cited_doc_ids"]:
            if int(d) not in evidence and int(d) in corpus:
                yield {**row, "p": corpus[int(d)], "label": 0, "source": "scifact-cited"}
        skip = evidence | {int(d) for d in c["cited_doc_ids"]}
        for d in similar(c["claim"], hard, skip):
            yield {**row, "p": corpus[d], "label": 0, "source": "scifact-similar"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=Path("training/pairs.jsonl"))
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    squad = list(squad_pairs(args.shared / "squad2" / "dev-v2.0.json", rng))
    held_text = "\n".join({str(r["p"]) for r in squad if r["split"] == "test"})
    rows = squad + list(qnli_pairs(args.shared / "qnli" / "dev.tsv", held_text))
    rows += list(scifact_pairs(args.shared / "scifact", rng))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts = Counter((str(r["split"]), str(r["source"]), int(r["label"])) for r in rows)  # type: ignore[call-overload]
    for key in sorted(counts):
        print(*key, counts[key], sep="\t")


if __name__ == "__main__":
    main()
