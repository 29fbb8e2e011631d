"""`ragline serve`'s uvicorn options, on real servers started with them: forwarded
headers are believed only from the proxies the operator lists."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import LiveServer


def _statuses(live: LiveServer, forwarded_for: Callable[[int], str], n: int) -> list[int]:
    with live.client() as c:
        return [
            c.post(
                "/api/search",
                json={"query": "what is rrf?"},
                headers={"X-Forwarded-For": forwarded_for(i)},
            ).status_code
            for i in range(n)
        ]


def test_a_spoofed_forwarded_for_does_not_get_around_the_rate_limit(
    docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    """By default no proxy is trusted, loopback included: a caller naming a new
    address on every request is still one client (it was 313 of 313 let through)."""
    live = serve(docs_index, rate_limit_per_minute=3)
    statuses = _statuses(live, lambda i: f"203.0.113.{i + 1}", 5)
    assert statuses == [200, 200, 200, 429, 429]


def test_a_configured_proxy_is_believed(docs_index: Path, serve: Callable[..., LiveServer]) -> None:
    """Behind a listed proxy each forwarded client has its own limit, and one client
    is still limited."""
    live = serve(docs_index, rate_limit_per_minute=3, serve_trusted_proxies=("127.0.0.1",))
    assert _statuses(live, lambda i: f"203.0.113.{i + 1}", 5) == [200] * 5
    assert _statuses(live, lambda i: "198.51.100.7", 5) == [200, 200, 200, 429, 429]


def test_serve_refuses_a_missing_index_folder(tmp_path: Path) -> None:
    """A missing folder silently became a new, empty index answering "I don't know":
    one line naming the path and `ragline ingest`, exit 1, nothing created."""
    from typer.testing import CliRunner

    from ragline.cli import app

    missing = tmp_path / "nope" / "index"
    result = CliRunner().invoke(app, ["serve", "--index", str(missing), "--port", "0"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "ragline ingest" in lines[0]
    assert not missing.exists()


def test_serve_names_an_invalid_setting_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad setting is a usage error (exit 2), one line naming it, no traceback."""
    from typer.testing import CliRunner

    from ragline.cli import app

    monkeypatch.setenv("RRF_K", "0")
    result = CliRunner().invoke(app, ["serve", "--index", str(tmp_path), "--port", "0"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: invalid setting RRF_K:"), lines


def test_serve_create_starts_on_an_empty_index(tmp_path: Path) -> None:
    """``--create`` is the explicit way to start empty (the upload API fills it): the
    real command, in a process of its own, becomes ready on a new folder."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    index = tmp_path / "new-index"
    env = {**os.environ, "RAGLINE_QUERY_LOG_SALT": "s"}
    cmd = [sys.executable, "-m", "ragline", "serve", "--index", str(index), "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:  # a file, not a pipe: a full pipe would block the server
        proc = subprocess.Popen([*cmd, "--create"], env=env, stdout=sink, stderr=sink)
    try:
        ready = False
        deadline = time.monotonic() + 120
        while not ready and time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                time.sleep(0.5)
        assert ready, log.read_text(errors="replace")[-2000:]
        assert index.exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
