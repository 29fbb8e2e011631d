"""The CLI at 80 and 60 columns and in a pipe: every figure printed whole, every
line within the width.

``ragline ingest`` runs as a user runs it (a subprocess with COLUMNS set, its
output a pipe); ``search``, ``ask``, ``status`` and every ``--help`` run through
typer's runner with COLUMNS set. Each figure the command computed (read back from
its JSON form) must appear as a whole word of the text output, and each line fits
the width unless it is one word wider than the line (a URL or a path, never cut).
``stats`` is checked in tests/serve/test_stats.py, over a server's query log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ragline.cli import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()
WIDTHS = [80, 60]


def words(text: str) -> set[str]:
    """The output's words, with table borders and trailing punctuation removed."""
    return {w.strip(",;()") for w in re.split(r"[\s│┃]+", text) if w}


def ingest_text(corpus: Path, index: Path, columns: int) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "RAGLINE_INDEX_DIR": str(index)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-m", "ragline", "ingest", str(corpus)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("width") / "tides"
    shutil.copytree(Path(__file__).with_name("fixtures") / "tides", folder)
    return folder


@pytest.mark.parametrize("columns", WIDTHS)
def test_ingest_prints_every_figure_whole(corpus: Path, tmp_path: Path, columns: int) -> None:
    index = tmp_path / "index"
    text = ingest_text(corpus, index, columns)
    report = json.loads((index / "reports" / "last-ingest.json").read_text())
    assert "…" not in text, text
    assert max(map(len, text.splitlines()[:-1])) <= columns, text  # the last line: a path
    got = words(text)
    figures = [
        str(report["files"]),
        str(len(report["indexed"])),
        f"{report['chunks']:,}",
        f"{report['chunks_embedded']:,}",
        f"{report['tokens']:,}",
        f"{report['index_chunks']:,}",
    ]
    for chapter in report["per_chapter"].values():
        figures += [f"{chapter['files']:,}", f"{chapter['chunks']:,}", f"{chapter['tokens']:,}"]
    missing = [f for f in figures if f not in got]
    # times: the JSON keeps 3 decimals of the value the table printed with 2
    for seconds in [report["seconds"], *report["stage_seconds"].values()]:
        if not {f"{seconds + d:.2f}" for d in (-0.0005, 0, 0.0005)} & got:
            missing.append(f"{seconds:.2f}")
    assert not missing, (missing, text)
    assert report["tokens"] > 1000  # a figure with a thousands separator was checked


@pytest.fixture(scope="module")
def index(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    idx = tmp_path_factory.mktemp("width-index") / "index"
    result = runner.invoke(app, ["ingest", str(corpus), "--index", str(idx), "--json"])
    assert result.exit_code == 0, result.output
    return idx


def run_at(columns: int, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def assert_fits(text: str, columns: int) -> None:
    """Every line at most ``columns`` wide, but for a line that is one word (a URL or
    a path wider than the line, printed whole rather than cut)."""
    wide = [line for line in text.splitlines() if len(line) > columns]
    assert not [line for line in wide if len(line.split()) > 1], (columns, wide, text)


@pytest.mark.parametrize("columns", WIDTHS)
def test_search_prints_scores_and_timings_whole(
    index: Path, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["search", "harmonic constituents amplitude", "--index", str(index)]
    data = json.loads(run_at(columns, monkeypatch, *args, "--json"))
    text = run_at(columns, monkeypatch, *args)
    got = words(text)
    scores = [f"{h['score']:.4f}" for h in data["hits"]]
    assert data["hits"] and not [f for f in scores if f not in got], text
    assert_fits(text, columns)
    # A hit's URL and snippet lines are indented under its numbered headline.
    body = [line for line in text.splitlines() if not re.match(r"^\s?\d+\. ", line)]
    assert body and all(line.startswith("    ") for line in body), text
    urls = [h["url"] for h in data["hits"]]
    assert all(u in text.split() for u in urls), text  # never cut mid-word
    # The timing line only with --verbose.
    assert " ms" not in text, text
    verbose = run_at(columns, monkeypatch, *args, "--verbose")
    assert_fits(verbose, columns)
    for stage in data["timings_ms"]:  # timed anew by the run: the form only
        assert re.search(rf"\b{stage}\s+\d+\.\d\s+ms\b", verbose), (stage, verbose)


@pytest.mark.parametrize("columns", WIDTHS)
def test_ask_prints_confidence_and_source_scores_whole(
    index: Path, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["ask", "What is chart datum?", "--index", str(index)]
    data = json.loads(run_at(columns, monkeypatch, *args, "--json"))
    text = run_at(columns, monkeypatch, *args)
    got = words(text)
    figures = [f"{data['confidence']['score']:.2f}"]
    figures += [f"{s['score']:.4f}" for s in data["sources"]]
    assert data["sources"] and not [f for f in figures if f not in got], text
    assert_fits(text, columns)
    assert " ms" not in text, text  # no developer timing line by default
    assert all(s["source"] in text.split() for s in data["sources"]), text
    verbose = run_at(columns, monkeypatch, *args, "--verbose")
    assert_fits(verbose, columns)
    assert re.search(r"\btotal \d+ ms\b", verbose), verbose


@pytest.mark.parametrize("columns", WIDTHS)
def test_status_prints_every_value_whole(
    index: Path, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = json.loads(run_at(columns, monkeypatch, "status", "--index", str(index), "--json"))
    got = words(run_at(columns, monkeypatch, "status", "--index", str(index)))
    numbers = [str(v) for v in data.values() if isinstance(v, int | float)]
    assert numbers and not [n for n in numbers if n not in got]
    text = run_at(columns, monkeypatch, "status", "--index", str(index))
    assert_fits(text, columns)
    assert not re.search(r"[{}\[\]']", text), text  # words, not Python dicts
    model = data["model"]
    assert f"model: {model['name']} ({model['dimension']} dimensions" in text, text


def command_names() -> list[list[str]]:
    """Every command and sub-command path, from the click group typer builds."""
    paths: list[list[str]] = [[]]
    for name, cmd in commands(typer.main.get_command(app)).items():
        paths.append([name])
        paths += [[name, sub] for sub in commands(cmd)]
    return paths


def commands(cmd: Any) -> dict[str, Any]:
    """A (typer-vendored) click group's commands; none for a plain command."""
    return dict(getattr(cmd, "commands", {}))


@pytest.mark.parametrize("columns", WIDTHS)
def test_help_fits_and_keeps_sentences_whole(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = command_names()
    assert len(paths) > 15
    for path in paths:
        assert_fits(run_at(columns, monkeypatch, *path, "--help"), columns)
    # A command's help is its docstring with each paragraph on one line: a line
    # break kept from the source broke the command list mid-sentence.
    for name, cmd in commands(typer.main.get_command(app)).items():
        for paragraph in (cmd.help or "").split("\n\n"):
            assert "\n" not in paragraph.strip(), (name, cmd.help)
    listing = " ".join(run_at(80, monkeypatch, "--help").split())
    assert "another store and verify the copy: counts per tenant" in listing.replace("│ ", "")
