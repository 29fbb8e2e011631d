"""The serve package is split by concern without import circles: each router module,
and each module it builds on, imports alone in a fresh interpreter; the exception
root is one class with input errors distinct from faults."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragline.answer.generators.base import GenerationError
from ragline.embed.base import EmbeddingError
from ragline.errors import FaultError, InputError, RaglineError
from ragline.eval.beir import DatasetError
from ragline.ingest.errors import IngestError
from ragline.serve.querylog import QueryLogError
from ragline.store.base import StoreError
from ragline.store.url import StoreUrlError
from ragline.validation import RequestProblem

SRC = Path(__file__).resolve().parents[2] / "src"
ROUTERS = [
    "ragline.serve.routes.answers",
    "ragline.serve.routes.search",
    "ragline.serve.routes.documents",
    "ragline.serve.routes.conversations",
    "ragline.serve.routes.ops",
    "ragline.serve.routes.openai",
    "ragline.serve.routes.feedback",
]
PARTS = ["ragline.serve.deps", "ragline.serve.errors", "ragline.serve.middleware"]


@pytest.mark.parametrize("module", ROUTERS + PARTS + ["ragline.serve.app"])
def test_module_imports_alone(module: str) -> None:
    """A circle shows as an ImportError ("partially initialized module") when the
    module is the first one of the package imported."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = f"import {module} as m; print(getattr(m, 'router', None) is not None)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    if module in ROUTERS:
        assert done.stdout.strip() == "True"


def serve_imports() -> dict[str, set[str]]:
    """Module → the ``ragline.serve`` modules it imports (anywhere in its body)."""
    root = SRC / "ragline" / "serve"
    names = {
        ".".join(("ragline", *p.relative_to(SRC / "ragline").with_suffix("").parts)): p
        for p in root.rglob("*.py")
    }
    names = {k.removesuffix(".__init__"): v for k, v in names.items()}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found |= {t for t in targets if t in names and t != name}
        graph[name] = found - {"ragline.serve", "ragline.serve.routes"}
    return graph


def test_no_import_circle_in_serve() -> None:
    graph = serve_imports()
    importers = {name for name, targets in graph.items() if "ragline.serve.app" in targets}
    assert importers == {"ragline.serve.cli"}  # only the command that runs it; no router
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        assert node not in path, " -> ".join([*path, node])
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*path, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])


def test_app_only_assembles() -> None:
    app = SRC / "ragline" / "serve" / "app.py"
    assert len(app.read_text().splitlines()) < 200


@pytest.mark.parametrize("error", [StoreError, EmbeddingError, GenerationError, QueryLogError])
def test_faults_share_the_root(error: type[Exception]) -> None:
    assert issubclass(error, FaultError) and issubclass(error, RaglineError)
    assert not issubclass(error, InputError)


@pytest.mark.parametrize("error", [IngestError, RequestProblem, StoreUrlError, DatasetError])
def test_input_errors_share_the_root(error: type[Exception]) -> None:
    assert issubclass(error, InputError) and issubclass(error, RaglineError)
    assert not issubclass(error, FaultError)
