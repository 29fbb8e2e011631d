"""The public Python API: what ``ragline`` exports, and the README's example."""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import ragline
import ragline.types
from ragline.engine import Ragline

REPO = Path(__file__).resolve().parents[1]

#: Protocols and errors that stay internal to one module, and why.
INTERNAL = {
    "BodyTooLarge": "raised inside the HTTP middleware; clients see a 413",
    "RequestProblem": "an HTTP handler's 4xx; clients see the JSON error body",
    "NotSaved": "caught by the answer routes; clients see metadata.conversation_note",
}


def _package_classes() -> dict[str, type]:
    """Every public protocol and exception class defined anywhere in the package."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(ragline.__path__, "ragline."):
        if info.name.endswith("__main__"):  # runs the CLI on import
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if not inspect.isclass(obj) or obj.__module__ != info.name or name.startswith("_"):
                continue
            if getattr(obj, "_is_protocol", False) or issubclass(obj, BaseException):
                found[name] = obj
    return found


def test_every_exported_name_imports() -> None:
    assert ragline.__all__ == sorted(ragline.__all__)
    assert len(set(ragline.__all__)) == len(ragline.__all__)
    for name in ragline.__all__:
        value = getattr(ragline, name)
        exec(f"from ragline import {name}", {})
        assert value is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = ragline.Nope


def test_every_public_protocol_and_error_is_exported() -> None:
    classes = _package_classes()
    assert {"Embedder", "Store", "Generator", "Reranker", "IngestError"} <= set(classes)
    missing = sorted(set(classes) - set(ragline.__all__) - set(INTERNAL))
    assert missing == []
    for name, cls in classes.items():
        if name in ragline.__all__:
            assert getattr(ragline, name) is cls, name


def test_every_type_is_exported() -> None:
    types = {
        name
        for name, obj in vars(ragline.types).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or name in ("Scalar", "Filters"))
        and getattr(obj, "__module__", "ragline.types") == "ragline.types"
    }
    assert {"Chunk", "Answer", "Citation", "SearchResult"} <= types
    assert sorted(types - set(ragline.__all__)) == []


def test_importing_a_type_loads_no_model_runtime() -> None:
    code = (
        "import sys; from ragline import Chunk, Store, IngestError; "
        "print(sorted(m for m in ('onnxruntime', 'lancedb') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert out.stdout.strip() == "[]"


def test_ingest_takes_str_and_path(make_rag: Callable[..., Ragline], tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Kites\n\nBox kites fly well in steady wind.\n")
    rag = make_rag()
    as_str = rag.ingest(str(folder))
    assert as_str.indexed == ["a.md"]
    as_path = rag.ingest(folder)
    assert as_path.skipped == ["a.md"] and as_path.root == as_str.root


def test_readme_example_runs_as_a_doctest(monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(>>> .*?)```", readme, flags=re.S)
    assert len(blocks) == 1
    statements = [line for line in blocks[0].splitlines() if line.startswith(">>> ")]
    assert len(statements) == 5
    monkeypatch.chdir(REPO)
    test = doctest.DocTestParser().get_doctest(blocks[0], {}, "README.md", "README.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test)
    assert result.attempted == 5
    assert result.failed == 0
