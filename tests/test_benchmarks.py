"""Every committed benchmark result names the script and command that produced it.

A table whose producer is gone (or was never written down) cannot be re-run or
checked, so each file under benchmarks/results/ must say, in its first lines,
``Produced by `…``` / ``Written by `…``` or carry the ``- command: `…``` line that
:func:`ragline.eval.machine.machine_lines`'s callers write, and every script it
names (``*.py`` / ``*.sh``, from the repository root or from benchmarks/, where
the scripts are run from) must exist.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
#: The producer must be named within this many lines of the top.
HEAD_LINES = 12
#: Raw inputs of another result, not tables: read back by a script, so no header.
RAW = {
    # written by benchmarks/peers/run.sh, read by benchmarks/peers/compare.py (peers.md)
    RESULTS / "peers" / "run_mode.txt",
}
PRODUCER = re.compile(r"^(?:.*\b(?:Produced|Written) by\b|- command:)")
SCRIPT = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.(?:py|sh))\b")


def result_files() -> list[Path]:
    files = sorted(p for ext in ("md", "txt") for p in RESULTS.rglob(f"*.{ext}"))
    return [p for p in files if p not in RAW]


def producer_problems(path: Path) -> list[str]:
    """What is wrong with ``path``'s producer line (empty when it names existing scripts)."""
    head = path.read_text(encoding="utf-8").splitlines()[:HEAD_LINES]
    lines = [line for line in head if PRODUCER.match(line)]
    if not lines:
        return [f"{path}: no 'Produced by `…`' or '- command: `…`' line in its first {HEAD_LINES}"]
    named = [m.group(1) for line in lines for m in SCRIPT.finditer(line)]
    if not named:
        return [f"{path}: its producer line names no script (.py / .sh): {lines[0]!r}"]
    return [
        f"{path}: names {name}, which is neither in the repository nor in benchmarks/"
        for name in named
        if not (REPO / name).is_file() and not (REPO / "benchmarks" / name).is_file()
    ]


def test_results_exist() -> None:
    assert len(result_files()) > 40


@pytest.mark.parametrize("path", result_files(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_result_names_an_existing_producer(path: Path) -> None:
    assert producer_problems(path) == []


def test_a_result_naming_a_missing_script_fails(tmp_path: Path) -> None:
    copy = tmp_path / "search.md"
    shutil.copy(RESULTS / "search.md", copy)
    assert producer_problems(copy) == []
    text = copy.read_text(encoding="utf-8")
    copy.write_text(text.replace("benchmarks/search_scale.py", "benchmarks/gone.py", 1))
    assert producer_problems(copy) == [
        f"{copy}: names benchmarks/gone.py, which is neither in the repository nor in benchmarks/"
    ]


def test_a_result_naming_no_producer_fails(tmp_path: Path) -> None:
    copy = tmp_path / "core_10000.md"
    lines = (RESULTS / "core_10000.md").read_text(encoding="utf-8").splitlines()
    copy.write_text("\n".join(line for line in lines if not line.startswith("- command:")))
    assert producer_problems(copy) == [
        f"{copy}: no 'Produced by `…`' or '- command: `…`' line in its first {HEAD_LINES}"
    ]
