"""The store going away under a running server (a real PostgreSQL stopped and
started again; LanceDB's index folder and Qdrant's local-mode folder moved away
and back): answers keep coming from
the cached popular chunks, marked low confidence with the reason; a search that has no
cache gets a clear 503; readiness and answers come back by themselves."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.settings import Settings

from .conftest import LiveServer, metric_value, start_server, stop_server

REPO = Path(__file__).resolve().parents[2]
QUESTION = "What does the section chunker do with tables?"
INTERNALS = ("SELECT", "postgres", "/tmp/", "tenant =")


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def assert_degraded_then_back(
    live: LiveServer, break_store: Callable[[], object], fix_store: Callable[[], object]
) -> None:
    with live.client() as c:
        normal = c.post("/api/query", json={"question": QUESTION}).json()
        assert normal["confidence"]["level"] in {"high", "medium"}
        break_store()
        r = c.post("/api/query", json={"question": QUESTION})
        assert r.status_code == 200, r.text
        degraded = r.json()
        assert degraded["confidence"]["level"] == "low"
        assert "unavailable" in degraded["confidence"]["reason"]
        assert degraded["answer"] and degraded["citations"]
        miss = c.post("/api/search", json={"query": "zebra giraffe octopus"})
        assert miss.status_code == 503
        assert not any(word in miss.text for word in INTERNALS), miss.text
        assert c.get("/readyz").status_code == 503
        fix_store()
        assert wait_for(lambda: c.get("/readyz").status_code == 200)
        back = c.post("/api/query", json={"question": QUESTION}).json()
        assert back["confidence"]["level"] in {"high", "medium"}
        assert "unavailable" not in back["confidence"]["reason"]


def test_postgres_stopped_and_started(
    tmp_path: Path, embedder: Embedder, make_pg_server: Callable[[], Any]
) -> None:
    server = make_pg_server()
    settings = Settings(
        index_dir=tmp_path / "index", store_url=server.url(), pg_max_retries=0,
        pg_connect_timeout_s=2, rate_limit_per_minute=0, warm_retry_s=0.5,
        store_retry_backoff_s=0.05,
    )  # fmt: skip
    rag = Ragline(settings, embedder=embedder)
    try:
        assert rag.ingest(REPO / "docs").indexed
    finally:
        rag.close()
    live = start_server(settings, embedder)
    try:
        assert_degraded_then_back(live, server.stop, server.start)
    finally:
        if not server.running():
            server.start()
        stop_server(live)


def test_postgres_down_at_start_up_recovers_without_restart(
    tmp_path: Path, embedder: Embedder, make_pg_server: Callable[[], Any]
) -> None:
    server = make_pg_server()
    settings = Settings(
        index_dir=tmp_path / "index", store_url=server.url(), pg_max_retries=0,
        pg_connect_timeout_s=2, rate_limit_per_minute=0, warm_retry_s=0.5,
    )  # fmt: skip
    rag = Ragline(settings, embedder=embedder)
    try:
        assert rag.ingest(REPO / "docs").indexed
    finally:
        rag.close()
    server.stop()
    rag = Ragline(settings, embedder=embedder)
    import socket
    import threading

    import uvicorn

    from ragline.serve.app import create_app

    app = create_app(settings, rag=rag)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=url, timeout=60) as c:
            assert wait_for(lambda: _status(c, "/readyz") == 503)
            r = c.post("/api/query", json={"question": QUESTION})
            assert r.status_code == 503 and r.json()["error"] == "unavailable"
            assert not any(word in r.text for word in INTERNALS), r.text
            server.start()
            assert wait_for(lambda: _status(c, "/readyz") == 200)
            r = c.post("/api/query", json={"question": QUESTION})
            assert r.status_code == 200 and r.json()["citations"]
    finally:
        uv.should_exit = True
        thread.join(timeout=15)
        rag.close()


def _status(c: httpx.Client, path: str) -> int:
    try:
        return c.get(path).status_code
    except httpx.TransportError:
        return 0


def test_lance_folder_moved_away_and_back(
    tmp_path: Path, docs_index: Path, embedder: Embedder
) -> None:
    index = tmp_path / "index"
    shutil.copytree(docs_index, index)
    aside = tmp_path / "aside"
    settings = Settings(
        index_dir=index, rate_limit_per_minute=0, warm_retry_s=0.5, store_retry_backoff_s=0.05
    )
    live = start_server(settings, embedder)
    lance = index / "lance"  # the LanceDB folder (tables and meta.json)
    try:
        assert_degraded_then_back(live, lambda: lance.rename(aside), lambda: aside.rename(lance))
    finally:
        if aside.exists():
            aside.rename(lance)
        stop_server(live)


def test_qdrant_local_folder_moved_away_and_back(tmp_path: Path, embedder: Embedder) -> None:
    folder = tmp_path / "qdrant"
    aside = tmp_path / "aside"
    settings = Settings(
        index_dir=tmp_path / "index", store_url=f"qdrant+local://{folder}",
        rate_limit_per_minute=0, warm_retry_s=0.5, store_retry_backoff_s=0.05,
    )  # fmt: skip
    rag = Ragline(settings, embedder=embedder)
    try:
        assert rag.ingest(REPO / "docs").indexed
    finally:
        rag.close()  # local mode locks its folder: one process (here, the server) at a time
    live = start_server(settings, embedder)
    try:
        assert_degraded_then_back(live, lambda: folder.rename(aside), lambda: aside.rename(folder))
    finally:
        if aside.exists():
            aside.rename(folder)
        stop_server(live)


def test_qdrant_local_folder_replaced_by_a_copy(tmp_path: Path, embedder: Embedder) -> None:
    """A restored copy (a new folder, same content) is reopened, not refused."""
    folder = tmp_path / "qdrant"
    settings = Settings(
        index_dir=tmp_path / "index", store_url=f"qdrant+local://{folder}",
        rate_limit_per_minute=0, warm_retry_s=0.5, store_retry_backoff_s=0.05,
    )  # fmt: skip
    rag = Ragline(settings, embedder=embedder)
    try:
        assert rag.ingest(REPO / "docs").indexed
    finally:
        rag.close()
    live = start_server(settings, embedder)
    try:

        def restore() -> None:
            shutil.copytree(tmp_path / "backup", folder)

        def lose() -> None:
            folder.rename(tmp_path / "backup")

        assert_degraded_then_back(live, lose, restore)
    finally:
        stop_server(live)


def test_one_malformed_stored_chunk_is_left_out_logged_and_counted(
    tmp_path: Path, docs_index: Path, embedder: Embedder, caplog: Any
) -> None:
    """A stored row with a missing field (``text`` NULL, as after a crash or a hand
    edit) turned every request that retrieved it into a 400 blaming the question: it
    is left out of the answer, logged with its id, and counted in /metrics."""
    import lancedb

    index = tmp_path / "index"
    shutil.copytree(docs_index, index)
    settings = Settings(index_dir=index, rate_limit_per_minute=0, query_log_salt="s")
    rag = Ragline(settings, embedder=embedder)
    try:
        top = rag.search(QUESTION).hits[0].chunk.id
    finally:
        rag.close()
    table = lancedb.connect(str(index / "lance")).open_table("chunks")
    table.update(where=f"id = '{top}'", values_sql={"text": "NULL"})

    live = start_server(settings, embedder)
    try:
        with live.client() as c, caplog.at_level("ERROR", logger="ragline.retrieve"):
            for path, field in (("/api/query", "question"), ("/api/search", "query")):
                r = c.post(path, json={field: QUESTION})
                assert r.status_code == 200, r.text
                assert top not in r.text
            metrics = c.get("/metrics").text
    finally:
        stop_server(live)
    logged = [r.getMessage() for r in caplog.records if top in r.getMessage()]
    assert len(logged) == 1 and "field text is missing" in logged[0]
    assert metric_value(metrics, "ragline_malformed_chunks") >= 1

    from typer.testing import CliRunner

    from ragline.cli import app

    status = CliRunner().invoke(app, ["status", "--index", str(index), "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["malformed_chunks"] == {
        "count": 1,
        "ids": {top: "field text is missing, not text"},
    }


@pytest.fixture
def read_only_index(tmp_path: Path, docs_index: Path) -> Iterator[Path]:
    """A copy of the docs index on a read-only file system: a read-only bind mount
    when running as root (root ignores file modes), else the modes taken away."""
    source, index = tmp_path / "source", tmp_path / "index"
    shutil.copytree(docs_index, source)
    index.mkdir()
    if os.geteuid() != 0:
        shutil.rmtree(index)
        source.rename(index)
        for p in [index, *index.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        yield index
        for p in [index, *index.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
        return
    for cmd in (["mount", "--bind", str(source), str(index)],
                ["mount", "-o", "remount,bind,ro", str(index)]):  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", str(index)], capture_output=True, check=False)
            pytest.skip(f"root without mount rights cannot make a read-only folder: {done.stderr}")
    try:
        yield index
    finally:
        subprocess.run(["umount", str(index)], check=True)


def test_a_read_only_index_is_served_read_only(read_only_index: Path, embedder: Embedder) -> None:
    """The server refused to start on a read-only index (a raw traceback), though it
    can be read: search, answers and chat work; uploads and deletions get a 503
    saying why."""
    settings = Settings(index_dir=read_only_index, rate_limit_per_minute=0, query_log_salt="s")
    live = start_server(settings, embedder)
    try:
        with live.client() as c:
            assert c.post("/api/search", json={"query": QUESTION}).status_code == 200
            r = c.post("/api/query", json={"question": QUESTION})
            assert r.status_code == 200 and r.json()["citations"], r.text
            with c.stream("POST", "/api/chat", json={"message": QUESTION}) as s:
                assert s.status_code == 200
                assert "event: done" in "".join(s.iter_text())
            up = c.post("/api/documents", files={"file": ("a.md", b"# A\n\nSome new text.")})
            assert up.status_code == 503 and up.json()["error"] == "read_only", up.text
            assert "read-only" in up.json()["message"]
            doc = c.get("/api/documents").json()["documents"][0]["doc_id"]
            gone = c.delete(f"/api/documents/{doc}")
            assert gone.status_code == 503 and gone.json()["error"] == "read_only"
    finally:
        stop_server(live)
