"""Fixtures of the PostgreSQL BM25 tests: the corpus generator (bm25_corpus.py)
and one index of its corpus per session, on the session's real PostgreSQL."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def gen() -> ModuleType:
    """bm25_corpus.py, loaded by path once (tests/ has no packages)."""
    name = "ragline_test_bm25_corpus"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("bm25_corpus.py")
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def corpus(pg_url: str, gen: ModuleType) -> tuple[str, str]:
    """(URL, schema) of the generated corpus, indexed and packed."""
    return pg_url, str(gen.index_corpus(pg_url))
