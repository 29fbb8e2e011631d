"""Shared fixtures: the real embedding model (loaded once) and real indexes in tmp dirs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    env = os.environ.get("RAGLINE_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "data", REPO.parent.parent / "shared" / "data"]
    for c in candidates:
        if (c / "d2l-en").is_dir():
            return c
    raise RuntimeError(
        "evaluation data not found: set RAGLINE_SHARED_DATA or put shared/data beside the repo"
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (SciFact, d2l-en): read only, never copied into the repo."""
    return _shared_data()


@pytest.fixture(scope="session")
def d2l(shared_data: Path) -> Path:
    return shared_data / "d2l-en"


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
