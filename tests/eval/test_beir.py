"""BEIR loader: what it reads, and errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragline.eval.beir import DatasetError, load_beir, load_qrels


def test_loads_the_judged_queries(beir_dir: Path) -> None:
    ds = load_beir(beir_dir, "test")
    assert sorted(ds.corpus) == ["d1", "d2", "d3", "d4", "d5"]
    assert ds.corpus["d3"].title == "Insect behaviour"
    assert sorted(ds.queries) == ["q1", "q2", "q3"]  # q9 has no judgements
    assert ds.qrels["q3"] == {"d4": 1, "d5": 1}
    assert len(ds.corpus_hash) == 64


def test_queries_judged_only_not_relevant_are_not_scored(beir_dir: Path) -> None:
    # q9 judged with relevance 0 only: no ranking could score it, so it must not
    # pull every mean down; q1 keeps its 0 judgement (it matters for nDCG's ideal).
    qrels = beir_dir / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q9\td1\t0\nq1\td1\t0\n")
    ds = load_beir(beir_dir, "test")
    assert sorted(ds.queries) == ["q1", "q2", "q3"]
    assert sorted(ds.qrels) == ["q1", "q2", "q3"]
    assert ds.qrels["q1"] == {"d2": 1, "d1": 0}


def test_corpus_hash_follows_the_content(beir_dir: Path) -> None:
    before = load_beir(beir_dir, "test").corpus_hash
    path = beir_dir / "corpus.jsonl"
    path.write_text(path.read_text().replace("waggle dance", "waggle dances"))
    assert load_beir(beir_dir, "test").corpus_hash != before


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        (
            "corpus.jsonl",
            '{"_id": "a", "text": "x"}\n[1, 2]\n',
            "corpus.jsonl:2: expected a JSON object",
        ),
        ("corpus.jsonl", '{"title": "t", "text": "x"}\n', "corpus.jsonl:1: missing field '_id'"),
        (
            "corpus.jsonl",
            '{"_id": "a", "text": "x"}\n{"_id": "a", "text": "y"}\n',
            "duplicate document id 'a'",
        ),
        ("corpus.jsonl", '{"_id": "a", "title": "", "text": " "}\n', "has neither title nor text"),
        ("queries.jsonl", '{"_id": "q1"}\n', "queries.jsonl:1: missing field 'text'"),
        ("queries.jsonl", '{"_id": "q1", "text": 3.5}\n', "field 'text' must be a string"),
    ],
)
def test_malformed_jsonl(beir_dir: Path, file: str, content: str, message: str) -> None:
    (beir_dir / file).write_text(content)
    with pytest.raises(DatasetError, match=message.replace("[", r"\[")):
        load_beir(beir_dir, "test")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("query-id\tcorpus-id\tscore\nq1\td2\n", "test.tsv:2: expected 3 tab-separated columns"),
        ("q1\td2\thigh\n", "test.tsv:1: score must be an integer, got 'high'"),
        ("\n", "no judgements"),
    ],
)
def test_malformed_qrels(beir_dir: Path, content: str, message: str) -> None:
    path = beir_dir / "qrels" / "test.tsv"
    path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        load_qrels(path)


def test_judged_document_missing_from_corpus(beir_dir: Path) -> None:
    (beir_dir / "qrels" / "test.tsv").write_text("q1\td404\t1\n")
    with pytest.raises(DatasetError, match="judges document 'd404', which is not in corpus"):
        load_beir(beir_dir, "test")


def test_missing_split_lists_the_ones_there(beir_dir: Path) -> None:
    with pytest.raises(DatasetError, match=r"train.tsv: file not found \(splits found: test\)"):
        load_beir(beir_dir, "train")


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not a folder"):
        load_beir(tmp_path / "nope", "test")


def _tag(beir_dir: Path, tags: dict[str, object]) -> None:
    """Rewrite queries.jsonl with the given ``lang`` fields (a dict value: metadata)."""
    lines = []
    for line in (beir_dir / "queries.jsonl").read_text().splitlines():
        query = json.loads(line)
        tag = tags.get(query["_id"])
        if isinstance(tag, dict):
            query["metadata"] = tag
        elif tag is not None:
            query["lang"] = tag
        lines.append(json.dumps(query))
    (beir_dir / "queries.jsonl").write_text("\n".join(lines) + "\n")


def test_query_languages_from_lang_or_metadata(beir_dir: Path) -> None:
    _tag(beir_dir, {"q1": "es", "q2": {"language": "fr"}, "q9": "de"})
    dataset = load_beir(beir_dir)
    assert dataset.languages == {"q1": "es", "q2": "fr"}  # q3 untagged; q9 not judged


def test_a_bad_language_tag_names_its_line(beir_dir: Path) -> None:
    _tag(beir_dir, {"q2": ""})
    with pytest.raises(DatasetError, match=r"queries.jsonl:2: field 'lang' must be"):
        load_beir(beir_dir)


def test_a_corpus_line_may_be_markdown(beir_dir: Path) -> None:
    lines = (beir_dir / "corpus.jsonl").read_text().splitlines()
    plain_hash = load_beir(beir_dir).corpus_hash
    first = json.loads(lines[0]) | {"format": "markdown"}
    (beir_dir / "corpus.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    dataset = load_beir(beir_dir)
    assert dataset.corpus["d1"].markdown and not dataset.corpus["d2"].markdown
    assert dataset.corpus_hash != plain_hash  # a cached plain-text index is not reused
    (beir_dir / "corpus.jsonl").write_text(
        "\n".join([json.dumps(first | {"format": "html"}), *lines[1:]]) + "\n"
    )
    with pytest.raises(DatasetError, match=r"corpus.jsonl:1: field 'format' is 'html'"):
        load_beir(beir_dir)
