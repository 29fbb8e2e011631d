"""No telemetry: a ragline run leaves no onnxruntime events database in $HOME."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENTS_DIR = Path(".cache", "Microsoft", "DeveloperTools", ".onnxruntime")


#: onnxruntime records nothing where these say "a CI machine" (CI=true does), which
#: would make both checks vacuous on CI: they are left out of the child's environment.
NOT_PASSED = {"ORT_DISABLE_TELEMETRY", "CI", "CONTINUOUS_INTEGRATION", "GITHUB_ACTIONS", "BUILD_ID"}


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    env.update(HOME=str(home), PYTHONPATH=str(REPO / "src"), COLUMNS="200")
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_onnxruntime_alone_does_write_the_events_database(tmp_path: Path) -> None:
    """The check below is not vacuous: importing onnxruntime by itself writes it."""
    result = run(tmp_path, "-c", "import onnxruntime")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / EVENTS_DIR / "onnxruntime.db").exists()


def test_ingest_and_ask_write_no_telemetry(tmp_path: Path) -> None:
    home, docs, index = tmp_path / "home", tmp_path / "docs", tmp_path / "index"
    home.mkdir()
    docs.mkdir()
    (docs / "tides.md").write_text(
        "# Tides\n\nSpring tides happen at new and full moon, when the sun and the moon "
        "pull along one line.\n"
    )
    ingest = run(home, "-m", "ragline", "ingest", str(docs), "--index", str(index))
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    ask = run(home, "-m", "ragline", "ask", "What causes spring tides?", "--index", str(index))
    assert ask.returncode == 0, ask.stdout + ask.stderr
    assert "tides.md" in ask.stdout  # retrieved and read
    # the embedder and the reader both ran an onnxruntime session, in two processes
    assert not (home / EVENTS_DIR).exists(), sorted(p.name for p in home.rglob("*"))
    # and a library user importing onnxruntime through ragline is covered too
    lib = run(home, "-c", "import ragline.embed.onnx as m; m.OnnxEmbedder().embed_query('x')")
    assert lib.returncode == 0, lib.stderr
    assert not (home / EVENTS_DIR).exists()
