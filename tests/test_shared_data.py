"""The evaluation-data gate of tests/conftest.py, run in a real pytest subprocess.

A throwaway test folder gets a copy of the real conftest and three tests: one
using the ``d2l`` fixture, one marked ``needs_data("scifact")`` by hand, one that
needs nothing. Without the data the first two skip with one line naming the
dataset and RAGLINE_SHARED_DATA and the run passes; with RAGLINE_REQUIRE_DATA=1
they fail the run; with the data they run; ``-m needs_data`` selects only them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = """
import pytest

def test_reads_the_book(d2l):
    assert (d2l / "chapter.md").read_text() == "# A chapter\\n"

@pytest.mark.needs_data("scifact")
def test_marked_by_hand():
    pass

def test_needs_nothing():
    pass
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    tests = tmp_path / "project" / "tests"
    tests.mkdir(parents=True)
    shutil.copy(Path(__file__).with_name("conftest.py"), tests / "conftest.py")
    (tests / "test_gate.py").write_text(TESTS, encoding="utf-8")
    return tests.parent


def run_pytest(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RAGLINE_SHARED_DATA", "RAGLINE_REQUIRE_DATA")
    }
    src = str(Path(__file__).resolve().parents[1] / "src")
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [src, environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *args],
        cwd=project,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_missing_data_skips_with_one_line_naming_it(project: Path, tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    result = run_pytest(project, RAGLINE_SHARED_DATA=str(empty))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 2 skipped" in result.stdout
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 2, skips  # one line per missing dataset
    d2l = next(line for line in skips if "d2l-en" in line)
    assert f"needs the d2l-en evaluation data, not found in {empty}" in d2l
    assert "RAGLINE_SHARED_DATA=/path/to/shared/data" in d2l
    assert any("needs the scifact evaluation data" in line for line in skips)


def test_require_data_turns_the_skip_into_a_failure(project: Path, tmp_path: Path) -> None:
    result = run_pytest(
        project, RAGLINE_SHARED_DATA=str(tmp_path / "nothing-here"), RAGLINE_REQUIRE_DATA="1"
    )
    assert result.returncode == 1, result.stdout
    assert "1 passed, 2 errors" in result.stdout
    assert "needs the d2l-en evaluation data" in result.stdout
    assert "[RAGLINE_REQUIRE_DATA=1]" in result.stdout
    assert "skipped" not in result.stdout


def test_present_data_runs_the_tests(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "shared" / "data"
    (data / "d2l-en").mkdir(parents=True)
    (data / "d2l-en" / "chapter.md").write_text("# A chapter\n")
    (data / "scifact").mkdir()
    result = run_pytest(project, RAGLINE_SHARED_DATA=str(data), RAGLINE_REQUIRE_DATA="1")
    assert result.returncode == 0, result.stdout
    assert "3 passed" in result.stdout


def test_the_marker_selects_only_the_data_tests(project: Path, tmp_path: Path) -> None:
    empty = str(tmp_path / "nothing-here")
    marked = run_pytest(project, "-m", "needs_data", RAGLINE_SHARED_DATA=empty)
    assert "2 skipped, 1 deselected" in marked.stdout, marked.stdout
    rest = run_pytest(project, "-m", "not needs_data", RAGLINE_SHARED_DATA=empty)
    assert rest.returncode == 0 and "1 passed, 2 deselected" in rest.stdout, rest.stdout
