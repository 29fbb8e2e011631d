"""One ingest per index at a time: a second one stops at once and names the first's pid."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.ingest.lock import IngestLockedError, ingest_lock

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()

HOLD = """
import sys, time
from pathlib import Path
from ragline.ingest.lock import ingest_lock
with ingest_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes stdin
"""


def write_docs(root: Path) -> Path:
    root.mkdir()
    for i in range(3):
        (root / f"page{i}.md").write_text(f"# Page {i}\n\nThe ferry leaves pier {i} at dawn.\n")
    return root


def test_a_second_ingest_stops_while_another_holds_the_index(tmp_path: Path) -> None:
    docs, index = write_docs(tmp_path / "docs"), tmp_path / "index"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(index)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = runner.invoke(app, ["ingest", str(docs), "--index", str(index)])
        assert result.exit_code == 2, result.output
        message = " ".join(result.stderr.split())
        assert f"another ingest is running on this index ({index}, pid {holder.pid})" in message
        assert not (index / "lance").exists()  # the second one wrote nothing
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    # the holder is gone (its lock with it): the index is built once, correctly
    result = runner.invoke(app, ["ingest", str(docs), "--index", str(index), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["indexed"]) == 3 and report["index_chunks"] == report["chunks"] == 3


def test_the_lock_is_released_after_a_run_and_on_error(tmp_path: Path) -> None:
    held = ingest_lock(tmp_path)
    with held, pytest.raises(IngestLockedError, match=f"pid {os.getpid()}"), ingest_lock(tmp_path):
        pass
    with pytest.raises(RuntimeError), ingest_lock(tmp_path):
        raise RuntimeError("a failing ingest")
    with ingest_lock(tmp_path):  # free again
        pass
