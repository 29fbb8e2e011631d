"""Languages and follow-ups end to end: react.dev pages in English and Japanese,
the real default model and index, through the CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app

PAGES = [
    ("en", "reference/react/lazy.md"),
    ("en", "reference/react/createRef.md"),
    ("en", "reference/react/startTransition.md"),
    ("ja", "reference/react/createRef.md"),
    ("ja", "reference/react/lazy.md"),
]
runner = CliRunner()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, react_docs: Path) -> Path:
    root = tmp_path_factory.mktemp("react")
    docs = root / "docs"
    for lang, page in PAGES:
        dest = docs / lang / page
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(react_docs / lang / page, dest)
    idx = root / "index"
    result = runner.invoke(app, ["ingest", str(docs), "--index", str(idx), "--json"])
    assert result.exit_code == 0, result.output
    return idx


def _search(index: Path, *args: str) -> dict[str, object]:
    result = runner.invoke(app, ["search", *args, "--index", str(index), "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads(result.stdout)
    return data


def test_language_is_stored_filterable_and_shown(index: Path) -> None:
    data = _search(index, "createRef", "--filter", "language=ja", "-k", "5")
    hits = data["hits"]
    assert isinstance(hits, list) and hits
    assert {h["language"] for h in hits} == {"ja"}
    assert all("/ja/" in h["source"] for h in hits)
    # heading ids became anchors, and left the titles
    assert any(h["url"].endswith("createRef.md#createref") for h in hits)
    assert all("{/*" not in " ".join(h["heading_path"]) for h in hits)
    args = ["search", "lazy", "--index", str(index), "-k", "2", "--verbose"]
    text = runner.invoke(app, args).stdout
    assert "language en" in text and "query language en" in text


def test_japanese_keyword_search_finds_japanese_pages(index: Path) -> None:
    data = _search(index, "クラスコンポーネントで ref を宣言する", "--mode", "bm25", "-k", "3")
    assert data["language"] == "ja"
    hits = data["hits"]
    assert isinstance(hits, list)
    assert hits[0]["source"].endswith("ja/reference/react/createRef.md")


def test_ask_in_japanese_answers_in_japanese(index: Path) -> None:
    """Half the chunks are Japanese, so the default embedder (auto) built the index with
    multilingual-e5 (MiniLM's Japanese cosines stay under its confidence floor: it gave
    the fallback), and the question is answered from the Japanese page, in Japanese."""
    report = json.loads((index / "reports" / "last-ingest.json").read_text("utf-8"))
    assert report["model"].startswith("multilingual-e5-small")
    assert re.match(r"multilingual model chosen: (4\d|5\d)% of \d+ sampled", report["model_choice"])
    result = runner.invoke(
        app, ["ask", "クラスコンポーネントで ref を宣言するには？", "--index", str(index), "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert not answer["metadata"]["fallback"]
    assert answer["sources"][0]["source"].endswith("ja/reference/react/createRef.md")
    assert "createRef" in answer["answer"] and "宣言" in answer["answer"]
    assert "最大関連度" in answer["confidence"]["reason"]


def test_ask_follow_up_with_history(index: Path, tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(
        json.dumps(
            [
                {"role": "user", "content": "How do I lazy-load a component with lazy?"},
                {"role": "assistant", "content": "Call lazy with a load function [1]."},
            ]
        )
    )
    args = ["ask", "Why does its state get reset?", "--index", str(index)]
    result = runner.invoke(app, [*args, "--history", str(history), "--json"])
    assert result.exit_code == 0, result.output
    meta = json.loads(result.stdout)["metadata"]
    assert meta["query_rewrite"] == "carry-over"
    assert meta["search_query"].startswith("Why does its state get reset? ")
    assert "lazy" in meta["search_query"]
    answer = json.loads(result.stdout)
    assert answer["sources"][0]["source"].endswith("en/reference/react/lazy.md")
    shown = runner.invoke(app, [*args, "--history", str(history)]).stdout
    assert "searched (carry-over)" in shown
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    failed = runner.invoke(app, [*args, "--history", str(bad)])
    assert failed.exit_code == 2 and "bad.json" in failed.output
