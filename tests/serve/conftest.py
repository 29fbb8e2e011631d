"""Real servers for the HTTP tests: uvicorn in a thread on 127.0.0.1, over an index of
the repository's docs/ folder built once (real model, real LanceDB in a temp dir)."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import uvicorn

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.serve.app import create_app
from ragline.serve.cli import proxy_options
from ragline.settings import Settings

REPO = Path(__file__).resolve().parents[2]


@dataclass
class LiveServer:
    url: str
    settings: Settings
    rag: Ragline
    server: uvicorn.Server
    thread: threading.Thread

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60.0, **kwargs)


@pytest.fixture(scope="session")
def docs_index(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """An index of docs/ (default tenant), built once for the serve tests."""
    index = tmp_path_factory.mktemp("serve") / "index"
    rag = Ragline(Settings(index_dir=index), embedder=embedder)
    try:
        report = rag.ingest(REPO / "docs")
    finally:
        rag.close()
    assert report.indexed and not report.failed
    return index


def start_server(settings: Settings, embedder: Embedder, rag: Ragline | None = None) -> LiveServer:
    """A server on a free loopback port, ready; over ``rag`` when given (else a new one)."""
    rag = rag or Ragline(settings, embedder=embedder)
    app = create_app(settings, rag=rag)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        **proxy_options(settings),  # as `ragline serve` runs it
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("the test server did not become ready")
        time.sleep(0.05)
    return LiveServer(url, settings, rag, server, thread)


def stop_server(live: LiveServer) -> None:
    live.server.should_exit = True
    live.thread.join(timeout=15)
    live.rag.close()


@pytest.fixture
def serve(embedder: Embedder) -> Iterator[Callable[..., LiveServer]]:
    """Start a server over a given index with settings overrides; stopped at teardown."""
    started: list[LiveServer] = []

    def factory(index: Path, **overrides: Any) -> LiveServer:
        settings = Settings(index_dir=index, **overrides)
        live = start_server(settings, embedder)
        started.append(live)
        return live

    yield factory
    for live in started:
        stop_server(live)


@pytest.fixture(scope="module")
def docs_server(docs_index: Path, embedder: Embedder) -> Iterator[LiveServer]:
    """One server per module over the docs index, rate limit off (a dedicated test
    checks it), keys off (the default tenant)."""
    live = start_server(
        Settings(index_dir=docs_index, rate_limit_per_minute=0, query_log_salt="test-salt"),
        embedder,
    )
    yield live
    stop_server(live)


def _scripted() -> ModuleType:
    """The scripted OpenAI-compatible server of tests/answer (one copy, not two)."""
    path = Path(__file__).resolve().parents[1] / "answer" / "conftest.py"
    spec = importlib.util.spec_from_file_location("ragline_test_scripted_llm", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def llm() -> Iterator[tuple[str, Any]]:
    """(base_url, script) of tests/answer's scripted OpenAI-compatible server on 127.0.0.1."""
    mod = _scripted()
    script = mod.ScriptedLLM()
    server = ThreadingHTTPServer(("127.0.0.1", 0), mod._handler(script))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", script
    finally:
        server.shutdown()
        server.server_close()


def sse_events(raw: str) -> list[tuple[str, Any]]:
    """Parse a raw text/event-stream body into (event, data) pairs (data JSON-decoded
    unless it is not JSON, like OpenAI's [DONE])."""
    events: list[tuple[str, Any]] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        name, data_lines = "message", []
        for line in block.split("\n"):
            if line.startswith(":") or not line:
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data_lines.append(value)
        if data_lines:
            text = "\n".join(data_lines)
            try:
                events.append((name, json.loads(text)))
            except json.JSONDecodeError:
                events.append((name, text))
    return events


def metric_value(text: str, name: str, **labels: str) -> float:
    """A sample of the Prometheus text exposition (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        metric, _, value = line.rpartition(" ")
        head, _, rest = metric.partition("{")
        if head != name:
            continue
        found = dict(part.split("=", 1) for part in rest.rstrip("}").split(",") if "=" in part)
        found = {k: v.strip('"') for k, v in found.items()}
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return 0.0
