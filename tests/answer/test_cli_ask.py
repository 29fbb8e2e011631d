"""`ragline ask` end to end on the sample corpus (docs/): real model and index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.answer.generators.prompt import FALLBACK_ANSWER
from ragline.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    idx = tmp_path_factory.mktemp("ask") / "index"
    result = runner.invoke(app, ["ingest", str(REPO / "docs"), "--index", str(idx), "--json"])
    assert result.exit_code == 0, result.output
    return idx


def test_ask_streams_the_answer_then_lists_sources(index: Path) -> None:
    result = runner.invoke(
        app, ["ask", "Which chunker follows the structure of the document?", "--index", str(index)]
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "[1]" in out or "[2]" in out
    assert "sources" in out and "Ingestion" in out and "ingestion.md" in out
    assert "confidence:" in out


def test_ask_json_has_the_documented_shape(index: Path) -> None:
    result = runner.invoke(
        app,
        ["ask", "How are chunks of a section chunker overlapped?", "--index", str(index), "--json"],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"answer", "sources", "citations", "confidence", "metadata"}
    assert payload["citations"] and payload["sources"]
    numbers = {s["number"] for s in payload["sources"]}
    chunk_ids = {cid for s in payload["sources"] for cid in s["chunk_ids"]}
    for c in payload["citations"]:
        assert c["number"] in numbers and c["chunk_id"] in chunk_ids
    meta = payload["metadata"]
    assert meta["generator"] == "extractive" and meta["complete"] is True
    assert {"retrieve", "context", "generate", "verify", "total"} <= set(meta["timings_ms"])
    assert meta["usage"]["context_tokens"] > 0
    assert payload["confidence"]["level"] in {"high", "medium"}
    documented = (REPO / "docs" / "answers.md").read_text()
    keys = [
        *payload,
        *payload["sources"][0],
        *payload["citations"][0],
        *meta,
        *payload["confidence"],
    ]
    for key in keys:
        assert f"`{key}`" in documented, key


def test_ask_out_of_scope_falls_back_with_suggestions(index: Path) -> None:
    result = runner.invoke(
        app, ["ask", "How do I bake sourdough bread?", "--index", str(index), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["answer"].startswith(FALLBACK_ANSWER)
    assert payload["metadata"]["fallback"] is True and payload["metadata"]["suggestions"]
    assert payload["citations"] == [] and payload["confidence"]["level"] == "low"


def test_ask_small_talk(index: Path) -> None:
    result = runner.invoke(app, ["ask", "hello!", "--index", str(index)])
    assert result.exit_code == 0 and "Hello" in result.stdout


def test_ask_usage_errors(index: Path) -> None:
    result = runner.invoke(app, ["ask", "x" * 1001, "--index", str(index)])
    assert result.exit_code == 2 and "limit is 1000" in result.stderr
    result = runner.invoke(app, ["ask", "why?", "--generator", "gpt", "--index", str(index)])
    assert result.exit_code == 2 and "--generator" in result.stderr
    result = runner.invoke(app, ["ask", "why?", "--generator", "openai", "--index", str(index)])
    assert result.exit_code == 2 and "LLM_BASE_URL" in result.stderr
