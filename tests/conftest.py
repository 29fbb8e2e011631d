"""Shared fixtures: the real embedding model (loaded once) and real indexes in tmp dirs."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.settings import Settings

REPO = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------- citation audit
# Every answer the answerer builds during the whole run (engine, CLI, HTTP, OpenAI
# endpoint, streaming) is recorded; at the end each citation [n] must name a chunk of
# context block n of that answer and sit on its "[n]" marker. A violation fails the run.
_ANSWERS: list[Any] = []


def _citation_problems(answer: Any) -> list[str]:
    blocks = {s.number: set(s.chunk_ids) for s in answer.sources}
    problems = []
    for c in answer.citations:
        if c.chunk_id not in blocks.get(c.number, ()):
            problems.append(
                f"{answer.question!r}: [{c.number}] {c.chunk_id} is not in block {c.number}"
            )
        elif answer.text[c.start : c.end] != f"[{c.number}]":
            problems.append(f"{answer.question!r}: [{c.number}] is not at {c.start}..{c.end}")
    return problems


@pytest.fixture(scope="session", autouse=True)
def every_citation_points_into_its_context() -> Iterator[None]:
    import ragline.answer.answerer as answerer

    real = answerer.Answer

    def recording(*args: Any, **kwargs: Any) -> Any:
        answer = real(*args, **kwargs)
        _ANSWERS.append(answer)
        return answer

    answerer.Answer = recording  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        answerer.Answer = real  # type: ignore[misc]
    problems = [p for a in _ANSWERS for p in _citation_problems(a)]
    assert not problems, problems[:20]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _ANSWERS:
        cited = sum(len(a.citations) for a in _ANSWERS)
        bad = sum(len(_citation_problems(a)) for a in _ANSWERS)
        terminalreporter.write_line(
            f"citation audit: {len(_ANSWERS)} answers, {cited} citations, "
            f"{cited - bad} in their context ({bad} outside)"
        )


# --------------------------------------------------------------- evaluation data
# The external evaluation data (../shared/data: the d2l-en textbook, SciFact,
# react-docs) is not part of the repository. Tests that read it get the
# ``needs_data`` marker (``-m needs_data`` selects them, ``-m "not needs_data"``
# leaves them out) and, on a machine without it, skip with one line naming the
# dataset and RAGLINE_SHARED_DATA. RAGLINE_REQUIRE_DATA=1 (set by .ci/run) turns
# that skip into a failure, so CI never skips them.

#: Dataset folder under the shared data root, for each fixture handing one out.
DATASETS = {"d2l": "d2l-en", "scifact": "scifact", "react_docs": "react-docs"}
DATA_FIXTURES = {"shared_data", *DATASETS}


def shared_data_roots() -> list[Path]:
    """Where the data may be: $RAGLINE_SHARED_DATA when set (and then only there),
    else shared/data beside the clone or one level above it."""
    env = os.environ.get("RAGLINE_SHARED_DATA")
    if env:
        return [Path(env)]
    return [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]


def require_data(dataset: str | None = None) -> Path:
    """The shared data root (``dataset`` None) or one dataset's folder in it; skip,
    or fail under RAGLINE_REQUIRE_DATA=1, with one line saying what is missing."""
    roots = shared_data_roots()
    for root in roots:
        found = root / dataset if dataset else root
        if found.is_dir():
            return found
    what = f"the {dataset} evaluation data" if dataset else "the evaluation data folder"
    message = (
        f"needs {what}, not found in {' or '.join(str(r) for r in roots)}: set "
        f"RAGLINE_SHARED_DATA=/path/to/shared/data (the folder holding "
        f"{dataset or 'd2l-en, scifact, react-docs'}/)"
    )
    if os.environ.get("RAGLINE_REQUIRE_DATA") == "1":
        pytest.fail(f"{message} [RAGLINE_REQUIRE_DATA=1]", pytrace=False)
    pytest.skip(message)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs_data(dataset, ...): reads external evaluation data from RAGLINE_SHARED_DATA "
        "(skipped without it; RAGLINE_REQUIRE_DATA=1 makes it fail instead)",
    )


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a data fixture, so ``-m needs_data`` finds it."""
    for item in items:
        used = DATA_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if used and not item.get_closest_marker("needs_data"):
            item.add_marker(pytest.mark.needs_data(*sorted(DATASETS.get(f, "") for f in used)))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``needs_data("scifact")`` by hand gets the same check."""
    for marker in item.iter_markers("needs_data"):
        for dataset in marker.args:
            if dataset:
                require_data(dataset)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (SciFact, d2l-en, react-docs): read only, never copied into the repo."""
    return require_data()


@pytest.fixture(scope="session")
def d2l() -> Path:
    """The d2l-en textbook (192 Markdown files): for tests about that book."""
    return require_data("d2l-en")


@pytest.fixture(scope="session")
def scifact() -> Path:
    return require_data("scifact")


@pytest.fixture(scope="session")
def react_docs() -> Path:
    return require_data("react-docs")


#: A small Markdown corpus written for these tests (a field guide to tide
#: prediction, not taken from any book): front matter, nested headings, prose,
#: lists, tables, code fences of three styles, inline and display maths. Tests
#: that need "some Markdown" read it, so they run on any machine.
TIDES = Path(__file__).resolve().parent / "fixtures" / "tides"


@pytest.fixture(scope="session")
def tides() -> Path:
    return TIDES


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default ONNX MiniLM model, loaded once per test session."""
    from ragline.embed.onnx import OnnxEmbedder

    return OnnxEmbedder()


@pytest.fixture
def make_rag(embedder: Embedder, tmp_path: Path) -> Iterator[Callable[..., Ragline]]:
    """Build a Ragline on a fresh index folder with the shared model."""
    made: list[Ragline] = []

    def factory(index: Path | None = None, **settings: object) -> Ragline:
        s = Settings(index_dir=index or tmp_path / "index", **settings)  # type: ignore[arg-type]
        rag = Ragline(s, embedder=embedder)
        made.append(rag)
        return rag

    yield factory
    for rag in made:
        rag.close()


def load_pgserver() -> ModuleType:
    """tests/pgserver.py, loaded by path once (tests/ has no packages)."""
    name = "ragline_test_pgserver"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("pgserver.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A real PostgreSQL 18 + pgvector on a free loopback port, one per session, run as
    an unprivileged user; stopped and deleted at the end. It fails (never skips) when
    the server cannot start."""
    server = load_pgserver().start_primary()
    yield server
    server.destroy()


@pytest.fixture(scope="session")
def make_pg_server() -> Iterator[Callable[[], Any]]:
    """Start more PostgreSQL servers (e.g. one a test may stop); all deleted at the end."""
    started: list[Any] = []

    def start() -> Any:
        server = load_pgserver().start_primary()
        started.append(server)
        return server

    yield start
    for server in started:
        server.destroy()


@pytest.fixture(scope="session")
def pg_url(pg_server: Any) -> str:
    """Connection URL of the session's PostgreSQL (superuser, database ``postgres``)."""
    return str(pg_server.url())
