"""A real index of the tides corpus, built once per module, for the adapters' tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.settings import Settings


@pytest.fixture(scope="module")
def tides_rag(
    embedder: Embedder, tides: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Ragline]:
    rag = Ragline(Settings(index_dir=tmp_path_factory.mktemp("index")), embedder=embedder)
    assert rag.ingest(tides).indexed
    yield rag
    rag.close()
