"""/metrics of `ragline serve --workers 2`: one scrape counts every worker's requests
(prometheus_client's multiprocess mode), latency histograms are named in seconds, and
the shared folder is removed at exit. The real command, in a process of its own."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from prometheus_client.multiprocess import MultiProcessCollector

from .conftest import metric_value

SEARCH = "ragline_http_requests_total"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def per_worker(folder: Path) -> dict[str, float]:
    """/api/search 200s by worker pid, read from each worker's own sample file."""
    out: dict[str, float] = {}
    for path in folder.glob("counter_*.db"):
        pid = path.stem.removeprefix("counter_")
        for metric in MultiProcessCollector.merge([str(path)]):
            for sample in metric.samples:
                labels = sample.labels
                if sample.name == SEARCH and labels.get("endpoint") == "/api/search":
                    out[pid] = out.get(pid, 0.0) + sample.value
    return out


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise AssertionError(log.read_text(errors="replace")[-3000:])


def search(url: str, i: int) -> int:
    """One request on a connection of its own, so the kernel may hand it to either worker."""
    body = {"query": f"chunk size {i}"}
    return httpx.post(f"{url}/api/search", json=body, timeout=120).status_code


def test_one_scrape_counts_both_workers(docs_index: Path, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "RAGLINE_QUERY_LOG_SALT": "s",
        "RAGLINE_RATE_LIMIT_PER_MINUTE": "0",
        "RAGLINE_LOG_FORMAT": "json",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    cmd = [sys.executable, "-m", "ragline", "serve", "--index", str(docs_index)]
    out, err = tmp_path / "serve.out", tmp_path / "serve.err"
    with out.open("wb") as o, err.open("wb") as e:  # files, not pipes: a full pipe blocks
        proc = subprocess.Popen(
            [*cmd, "--port", str(port), "--workers", "2"], env=env, stdout=o, stderr=e
        )
    try:
        wait_ready(url, proc, err)
        said = re.search(r"shared through (\S+)", out.read_text())
        assert said, out.read_text()
        folder = Path(said.group(1))
        sent = 0
        with ThreadPoolExecutor(8) as pool:
            # until both workers have answered some (the kernel picks who accepts)
            while len(per_worker(folder)) < 2 and sent < 400:
                codes = list(pool.map(lambda i: search(url, i), range(sent, sent + 16)))
                assert codes == [200] * 16
                sent += 16
        by_pid = per_worker(folder)
        assert len(by_pid) == 2 and all(n > 0 for n in by_pid.values()), by_pid
        assert sum(by_pid.values()) == sent
        # one scrape, whichever worker answers it, counts them all
        for _ in range(4):
            text = httpx.get(f"{url}/metrics", timeout=30).text
            count = metric_value(text, SEARCH, endpoint="/api/search", status="200")
            assert count == sent
            assert "ragline_http_request_seconds_bucket" in text
            assert "ragline_stage_seconds_bucket" in text
            assert "ragline_stage_latency_ms" not in text
            assert not re.search(r"^\w+_ms[{ ]", text, re.M)  # no millisecond metrics left
        assert folder.is_dir()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert not folder.exists()  # the parent's temporary folder is gone
    lines = err.read_text(errors="replace").splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    started = {r["message"] for r in records if r["message"].startswith("Started server process")}
    assert len(started) == 2, lines[-20:]  # both workers' uvicorn lines, as JSON
    assert not [line for line in lines if re.match(r"(INFO|WARNING|ERROR):\s", line)]
