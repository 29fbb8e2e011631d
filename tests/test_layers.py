"""The layers of docs/architecture.md hold: nothing imports upward, so no cycles.

The contracts live in pyproject.toml (``[tool.importlinter]``) and are checked by
import-linter's own command, on this checkout and on a copy given one upward import.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import ragline

SRC = Path(ragline.__file__).resolve().parent.parent
REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _run(args: list[str], src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``args`` in a fresh process that imports ragline from ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's check of pyproject.toml's contracts on the ragline under ``src``."""
    config = str(REPO / "pyproject.toml")
    return _run([str(LINT), "--config", config, "--no-cache"], src, cwd)


def test_the_contracts_are_kept() -> None:
    done = lint_imports(SRC, REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ragline layers (docs/architecture.md) KEPT" in done.stdout
    assert "0 broken" in done.stdout


def test_an_upward_import_breaks_the_build(tmp_path: Path) -> None:
    """The store importing the engine (the kind of import that made the old cycles)
    is reported with its module and line, and the check exits non-zero."""
    copy = tmp_path / "src"
    shutil.copytree(SRC / "ragline", copy / "ragline", ignore=shutil.ignore_patterns("assets"))
    base = copy / "ragline" / "store" / "base.py"
    lines = base.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("from ragline."))
    lines.insert(at, "from ragline.engine import Ragline  # noqa: F401\n")
    base.write_text("".join(lines), encoding="utf-8")
    done = lint_imports(copy, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ragline layers (docs/architecture.md) BROKEN" in done.stdout
    assert "ragline.store is not allowed to import ragline.engine" in done.stdout
    assert f"ragline.store.base -> ragline.engine (l.{at + 1})" in done.stdout


def test_settings_load_no_numpy_and_no_other_layer() -> None:
    """Settings sit below every part that uses them: reading them loads neither numpy
    (the store's and the models' runtime) nor any ragline module but the plain types."""
    code = (
        "import sys, ragline.settings\n"
        "print(sorted(m for m in sys.modules if m.startswith('ragline')))\n"
        "print('numpy' in sys.modules)\n"
    )
    done = _run([sys.executable, "-c", code], SRC, REPO)
    assert done.returncode == 0, done.stderr
    modules, numpy = done.stdout.splitlines()
    sections = sorted(
        f"ragline.settings.{p.stem}" for p in (SRC / "ragline" / "settings").glob("[!_]*.py")
    )
    assert modules == str(
        ["ragline", "ragline.lazy", "ragline.settings", *sections, "ragline.types"]
    )
    assert numpy == "False"


ARCHITECTURE = REPO / "docs" / "architecture.md"
#: Relative links of the doc: ``[text](../src/ragline/x.py)``.
LINK = re.compile(r"\]\((\.\./[^)#\s]+)\)")


def test_every_path_the_architecture_doc_links_exists() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    links = LINK.findall(text)
    assert len(links) > 30, links
    missing = [link for link in links if not (ARCHITECTURE.parent / link).exists()]
    assert missing == []


def test_the_architecture_doc_shows_the_contracts_layers() -> None:
    """The doc's table, row by row, names the modules of each layer of the contract."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contract = config["tool"]["importlinter"]["contracts"][0]
    assert contract["type"] == "layers"
    layers = [{m.strip() for m in layer.split("|")} for layer in contract["layers"]]
    rows = []
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        first = line.split(" | ")[0]
        if line.startswith("| [`"):
            targets = LINK.findall(first)
            rows.append({Path(t).name.removesuffix(".py") for t in targets})
    assert rows == [layer for layer in layers if layer != {"__main__"}]
