"""Store-test fixtures: real Chroma and FalkorDB servers (tests/servers.py), one each
per session, on free loopback ports; stopped and deleted at the end."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def load_servers() -> ModuleType:
    """tests/servers.py, loaded by path once (tests/ has no packages)."""
    name = "ragline_test_servers"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "servers.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    server = load_servers().start_chroma(tmp_path_factory.mktemp("chroma-server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chroma_url(chroma_server: Any) -> str:
    return str(chroma_server.url())


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    server = load_servers().start_falkordb(tmp_path_factory.mktemp("falkordb-server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def falkordb_url(falkordb_server: Any) -> str:
    return str(falkordb_server.url())
