"""`ragline eval` end to end on the tiny BEIR fixture: real index, real model, real FTS."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.eval.runs import EVAL_MODES, METRIC_NAMES

runner = CliRunner()
MODES = [m for m in EVAL_MODES if m != "rerank"]


def _ndcg_one_of_two_at_rank_1() -> float:
    return 1.0 / (1.0 + 1.0 / math.log2(3))


def test_json_report_and_hand_computed_bm25_scores(
    beir_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGLINE_EMBED_THREADS", "1")
    report = tmp_path / "out" / "report.md"
    args = ["eval", str(beir_dir), "--json", "--cache-dir", str(tmp_path / "cache")]
    result = runner.invoke(app, [*args, "--report", str(report)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)

    assert (data["dataset"], data["split"], data["queries"], data["documents"]) == (
        "tiny",
        "test",
        3,  # q9 has no judgements
        5,
    )
    assert data["chunks"] == 5 and data["top_k"] == 100
    assert data["index"]["reused"] is False
    assert list(data["modes"]) == MODES  # rerank only with a cross-encoder configured
    for mode in MODES:
        assert set(data["modes"][mode]["metrics"]) == set(METRIC_NAMES)
        lat = data["modes"][mode]["latency_ms"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"]

    # BM25: q1's only relevant doc (d2) is 2nd behind d1; q2's (d3) is 1st; q3 has two
    # relevant docs and only d4 (1st) shares a word with it.
    bm25 = data["modes"]["bm25"]["metrics"]
    ndcg = (1 / math.log2(3) + 1.0 + _ndcg_one_of_two_at_rank_1()) / 3
    assert bm25["ndcg@10"] == pytest.approx(ndcg, abs=1e-4)
    assert bm25["mrr@10"] == pytest.approx((0.5 + 1 + 1) / 3, abs=1e-4)
    assert bm25["recall@10"] == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-4)
    assert bm25["recall@100"] == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-4)
    assert bm25["p@5"] == pytest.approx((0.2 + 0.2 + 0.2) / 3, abs=1e-4)
    # Vector search ranks all five documents, so every relevant one is found.
    assert data["modes"]["vector"]["metrics"]["recall@100"] == pytest.approx(1.0)

    text = report.read_text()
    assert text.startswith("# Retrieval evaluation: tiny (test)")
    assert (
        "| mode | ndcg@10 | mrr@10 | recall@10 | recall@100 | p@5 | ndcg@5 | recall@3 | mrr |"
        in text
    )
    assert f"| bm25 | {bm25['ndcg@10']:.4f} |" in text
    assert "**hybrid-weighted** (default)" in text  # the shipped HYBRID_MERGE_METHOD

    # Same corpus, model and chunking: the second run reuses the index.
    again = runner.invoke(app, [*args, "--modes", "bm25", "--limit", "1"])
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert second["index"]["reused"] is True
    assert second["queries"] == 1
    assert list(second["modes"]) == ["bm25"]
    assert second["modes"]["bm25"]["metrics"]["mrr@10"] == pytest.approx(0.5)


@pytest.mark.parametrize("columns", [200, 80, 60])
def test_table_output(
    beir_dir: Path, tmp_path: Path, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every metric whole at any width: one row per mode when it fits, else turned."""
    monkeypatch.setenv("COLUMNS", str(columns))
    args = ["eval", str(beir_dir), "--modes", "bm25,vector", "--cache-dir", str(tmp_path / "c")]
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "…" not in text and max(map(len, text.splitlines())) <= columns, text
    assert "tiny (test): 3 queries, 5 documents, 5 chunks" in " ".join(text.split())
    assert "0.8333" in text  # bm25's MRR@10 by hand
    words = set(text.replace("│", " ").replace("┃", " ").split())
    for mode in ("bm25", "vector"):
        for value in data["modes"][mode]["metrics"].values():
            assert f"{value:.4f}" in words, (mode, value, text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--modes", "bm25,fuzzy"], "unknown mode(s) fuzzy"),
        (["--split", "dev"], "dev.tsv: file not found (splits found: test)"),
    ],
)
def test_usage_errors(beir_dir: Path, tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["eval", str(beir_dir), "--cache-dir", str(tmp_path / "c"), *args])
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())


def test_bad_corpus_line_is_named(beir_dir: Path, tmp_path: Path) -> None:
    with (beir_dir / "corpus.jsonl").open("a") as f:
        f.write('{"_id": "d6", "title": "broken"\n')
    result = runner.invoke(app, ["eval", str(beir_dir), "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 2
    assert "corpus.jsonl:6: not valid JSON" in " ".join(result.stderr.split())


def test_queries_tagged_with_languages_are_scored_per_language(
    beir_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGLINE_EMBED_THREADS", "1")
    queries = [json.loads(line) for line in (beir_dir / "queries.jsonl").read_text().splitlines()]
    for q in queries:
        q["lang"] = "es" if q["_id"] == "q3" else "en"
    (beir_dir / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    report = tmp_path / "report.md"
    args = ["eval", str(beir_dir), "--modes", "bm25", "--json", "--report", str(report)]
    result = runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    languages = json.loads(result.stdout)["modes"]["bm25"]["languages"]
    assert list(languages) == ["en", "es"]
    # en: q1's relevant doc 2nd, q2's 1st; es: q3 finds one of its two at rank 1.
    assert languages["en"]["queries"] == 2 and languages["es"]["queries"] == 1
    assert languages["en"]["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1) / 2, abs=1e-4)
    assert languages["en"]["recall@3"] == pytest.approx(1.0)
    assert languages["es"]["ndcg@10"] == pytest.approx(_ndcg_one_of_two_at_rank_1(), abs=1e-4)
    assert languages["es"]["recall@3"] == pytest.approx(0.5)
    text = report.read_text()
    assert "| bm25 | es | 1 |" in text and "Per language" in text


def test_auto_measures_the_model_an_ingest_of_the_corpus_would_choose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAGLINE_EMBEDDER=auto (the default): a Spanish corpus is evaluated with the
    multilingual model, as its ingest would index it (the eval used the English
    model whatever the corpus, so it measured an index no user would have)."""
    monkeypatch.setenv("RAGLINE_EMBEDDER", "auto")
    monkeypatch.setenv("RAGLINE_EMBED_THREADS", "1")
    root = tmp_path / "es"
    (root / "qrels").mkdir(parents=True)
    topics = ("los volcanes y sus erupciones", "las abejas y su baile", "el pan de masa madre")
    docs = [
        {"_id": f"d{i}", "title": t.capitalize(), "text": f"Este texto explica {t} con detalle. "
         f"Hablamos de {t} en la historia, en la ciencia y en la vida de cada día."}
        for i, t in enumerate(topics)
    ]  # fmt: skip
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "¿Cómo bailan?"}) + "\n")
    (root / "qrels" / "test.tsv").write_text("q\td1\t1\n")
    args = ["eval", str(root), "--modes", "bm25", "--json", "--cache-dir", str(tmp_path / "c")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "e5" in json.loads(result.stdout)["model"]
