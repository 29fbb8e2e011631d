"""Tiny BEIR-layout and claims fixtures, written by the tests themselves.

The documents are built so the rankings are known by hand: in BM25, query q1's
only relevant document (d2) comes second behind d1, which repeats both query
words; q2's relevant document (d3) is the only one sharing its words; q3 has two
relevant documents, and only d4 shares a word with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS = [
    {
        "_id": "d1",
        "title": "Field notes",
        "text": "Volcano eruption. The volcano eruption sent lava down the slope, "
        "and the eruption of the volcano lasted a week.",
    },
    {
        "_id": "d2",
        "title": "Mountain guide",
        "text": "A mountain range can hold an old volcano among many quiet peaks, "
        "glaciers, meadows, forests, rivers, lakes and small villages.",
    },
    {
        "_id": "d3",
        "title": "Insect behaviour",
        "text": "Honey bees communicate the location of flowers with a waggle dance.",
    },
    {
        "_id": "d4",
        "title": "Kitchen basics",
        "text": "Sourdough bread needs a starter, flour, water and salt.",
    },
    {
        "_id": "d5",
        "title": "Bakery history",
        "text": "Loaves were baked in communal ovens in medieval towns.",
    },
]
QUERIES = [
    {"_id": "q1", "text": "volcano eruption"},
    {"_id": "q2", "text": "How do honey bees communicate where flowers are?"},
    {"_id": "q3", "text": "sourdough starter"},
    {"_id": "q9", "text": "a query without judgements is not evaluated"},
]
QRELS = [("q1", "d2", 1), ("q2", "d3", 1), ("q3", "d4", 1), ("q3", "d5", 1)]


def write_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in QRELS]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "tiny")


SENTENCES = [
    {
        "doc_id": 11,
        "title": "Coral reefs",
        "abstract": [
            "Coral reefs cover a small part of the ocean floor.",
            "Warmer seas make corals expel their symbiotic algae and bleach.",
            "Reefs shelter about a quarter of all marine species.",
        ],
    },
    {
        "doc_id": 12,
        "title": "Glacier retreat",
        "abstract": [
            "Mountain glaciers have lost mass in every decade since 1950.",
            "Meltwater from retreating glaciers feeds rivers in dry summers.",
            "Glacier loss raises the sea level by about one millimetre a year.",
        ],
    },
    {
        "doc_id": 13,
        "title": "Sleep and memory",
        "abstract": [
            "Deep sleep helps the brain consolidate new memories.",
            "Students who slept after learning recalled more words the next day.",
        ],
    },
]
CLAIMS = [
    {
        "id": 1,
        "claim": "Warmer seas make corals expel their symbiotic algae and bleach.",
        "evidence": {"11": [{"sentences": [1], "label": "SUPPORT"}]},
        "cited_doc_ids": [11],
    },
    {
        "id": 2,
        "claim": "Mountain glaciers have lost mass in every decade since 1950.",
        "evidence": {"12": [{"sentences": [0], "label": "SUPPORT"}, {"sentences": [2]}]},
        "cited_doc_ids": [12],
    },
    {"id": 3, "claim": "Sleep has no effect on memory.", "evidence": {}, "cited_doc_ids": [13]},
]
OUT_OF_SCOPE = ["What is the capital of Australia?", "How do I change the oil in my car?"]


@pytest.fixture
def claims_dir(tmp_path: Path) -> Path:
    root = tmp_path / "claims"
    root.mkdir()
    (root / "corpus_sentences.jsonl").write_text("".join(json.dumps(d) + "\n" for d in SENTENCES))
    (root / "claims_train.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CLAIMS))
    return root


@pytest.fixture
def out_of_scope_file(tmp_path: Path) -> Path:
    path = tmp_path / "oos.jsonl"
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in OUT_OF_SCOPE))
    return path
