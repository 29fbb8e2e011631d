"""Rate limiting: the exact sliding window, in memory and shared by real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ragline.serve.ratelimit import (
    MemoryRateLimiter,
    RateDecision,
    SqliteRateLimiter,
    UnlimitedRateLimiter,
    decide,
    make_rate_limiter,
)
from ragline.settings import Settings


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_decide_allows_limit_then_refuses_until_the_oldest_expires() -> None:
    hits: list[float] = []
    decisions: list[RateDecision] = []
    for i in range(11):
        d, hits = decide(hits, 100.0 + i, limit=10, window=60.0)
        decisions.append(d)
    assert [d.allowed for d in decisions] == [True] * 10 + [False]
    assert [d.remaining for d in decisions] == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]
    refused = decisions[-1]
    # The oldest hit (t=100) leaves the window at t=160; the 11th came at t=110.
    assert refused.retry_after == pytest.approx(50.0)
    assert refused.retry_after_header == "50"
    assert len(hits) == 10  # refused requests are not stored


def test_decide_expiry_is_exclusive_at_the_window_edge() -> None:
    hits = [float(t) for t in range(10)]
    d, _ = decide(hits, 59.999, limit=10, window=60.0)
    assert not d.allowed and d.retry_after == pytest.approx(0.001)
    d, kept = decide(hits, 60.0, limit=10, window=60.0)  # t=0 has expired exactly now
    assert d.allowed and kept == [*range(1, 10), 60.0]


def test_decide_rejects_a_zero_limit() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        decide([], 0.0, limit=0)


def test_memory_limiter_eleventh_request_in_a_minute_is_refused() -> None:
    clock = Clock()
    rl = MemoryRateLimiter(10, clock=clock)
    results = []
    for _ in range(11):
        results.append(rl.hit("1.2.3.4"))
        clock.t += 2.0
    assert sum(d.allowed for d in results) == 10
    assert not results[-1].allowed
    assert results[-1].retry_after == pytest.approx(60.0 - 20.0)
    assert rl.hit("5.6.7.8").allowed  # other clients are counted apart
    clock.t = 1000.0 + 60.0  # the first hit (t=1000) expires exactly now
    assert rl.hit("1.2.3.4").allowed
    assert not rl.hit("1.2.3.4").allowed


def test_memory_limiter_sweeps_idle_clients() -> None:
    clock = Clock()
    rl = MemoryRateLimiter(3, clock=clock)
    for i in range(50):
        rl.hit(f"10.0.0.{i}")
    assert len(rl) == 50
    clock.t += 61.0
    rl.hit("10.0.1.1")
    assert len(rl) == 1


def test_memory_limiter_is_exact_under_threads() -> None:
    rl = MemoryRateLimiter(25, clock=Clock())
    allowed: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            ok = rl.hit("same").allowed
            with lock:
                allowed.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(allowed) == 160 and sum(allowed) == 25


def test_sqlite_limiter_window_and_pruning(tmp_path: Path) -> None:
    clock = Clock(5000.0)
    rl = SqliteRateLimiter(tmp_path / "rl.sqlite3", 10, clock=clock)
    try:
        got = [rl.hit("a") for _ in range(11)]
        assert [d.allowed for d in got] == [True] * 10 + [False]
        assert got[-1].retry_after == pytest.approx(60.0)
        for i in range(30):
            rl.hit(f"client-{i}", now=5010.0)
        assert rl.rows() == 10 + 30
        # Past the window every old row goes on the next hit: the table stays bounded.
        assert rl.hit("a", now=5070.5).allowed
        assert rl.rows() == 1
    finally:
        rl.close()


def test_sqlite_limiter_state_survives_a_new_instance(tmp_path: Path) -> None:
    path = tmp_path / "rl.sqlite3"
    first = SqliteRateLimiter(path, 2, clock=Clock(10.0))
    assert first.hit("k").allowed and first.hit("k").allowed
    first.close()
    second = SqliteRateLimiter(path, 2, clock=Clock(30.0))
    try:
        d = second.hit("k")
        assert not d.allowed and d.retry_after == pytest.approx(40.0)
    finally:
        second.close()


_WORKER = """
import json, sys, time
from pathlib import Path
from ragline.serve.ratelimit import SqliteRateLimiter
path, go, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
rl = SqliteRateLimiter(path, 10)
while not go.exists():
    time.sleep(0.005)
out = [rl.hit("198.51.100.7") for _ in range(n)]
print(json.dumps([[d.allowed, d.retry_after] for d in out]))
"""


def test_sqlite_limiter_shared_by_processes_never_exceeds_the_limit(tmp_path: Path) -> None:
    path, go = tmp_path / "shared.sqlite3", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), str(go), "15"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    time.sleep(0.5)  # let them import and open the file, so they start together
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    flat = [r for proc in results for r in proc]
    assert len(flat) == 45
    assert sum(allowed for allowed, _ in flat) == 10
    waits = [wait for allowed, wait in flat if not allowed]
    assert all(0 < w <= 60 for w in waits)


def test_make_rate_limiter_follows_the_settings(tmp_path: Path) -> None:
    assert isinstance(make_rate_limiter(Settings(rate_limit_per_minute=0)), UnlimitedRateLimiter)
    mem = make_rate_limiter(Settings(rate_limit_per_minute=3))
    assert isinstance(mem, MemoryRateLimiter) and mem.limit == 3
    for backend in (str(tmp_path / "a.sqlite3"), f"sqlite:///{tmp_path / 'b.sqlite3'}"):
        rl = make_rate_limiter(Settings(rate_limit_per_minute=4, rate_limit_backend=backend))
        assert isinstance(rl, SqliteRateLimiter) and rl.limit == 4
        assert rl.path.exists()
        rl.close()
    with pytest.raises(ValueError, match="RATE_LIMIT_BACKEND"):
        make_rate_limiter(Settings(rate_limit_backend="redis://localhost"))


def test_sqlite_limiter_lets_requests_through_when_storage_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rl = SqliteRateLimiter(tmp_path / "rl.sqlite3", 1, timeout_s=0.05, clock=Clock())
    assert rl.hit("x").allowed
    blocker = rl.__class__(tmp_path / "rl.sqlite3", 1, timeout_s=0.05)
    blocker._conn.execute("BEGIN EXCLUSIVE")  # another worker holds the write lock
    try:
        d = rl.hit("x")
        assert d.allowed  # fail open: the limiter must not take the service down
        assert "rate limiter" in caplog.text
    finally:
        blocker._conn.execute("ROLLBACK")
        blocker.close()
        rl.close()


def test_several_workers_share_an_in_memory_limit_through_the_index_folder(
    tmp_path: Path,
) -> None:
    from ragline.serve.cli import shared_rate_limit_backend

    def backend(**kw: object) -> str:
        return shared_rate_limit_backend(Settings(index_dir=tmp_path, **kw))  # type: ignore[arg-type]

    assert backend() == str(tmp_path / "ratelimit.sqlite3")
    assert backend(rate_limit_backend="/srv/rl.sqlite3") == "/srv/rl.sqlite3"
    assert backend(rate_limit_per_minute=0) == "memory"  # no limit, nothing to share


def test_limiters_say_whether_they_block(tmp_path: Path) -> None:
    assert UnlimitedRateLimiter.blocking is False
    assert MemoryRateLimiter(3).blocking is False
    sqlite = SqliteRateLimiter(tmp_path / "rate.sqlite3", 3)
    try:
        assert sqlite.blocking is True
    finally:
        sqlite.close()


class ThreadRecordingLimiter:
    """Lets every request through and notes the thread each hit ran in."""

    def __init__(self, blocking: bool) -> None:
        self.blocking = blocking
        self.threads: list[threading.Thread] = []

    def hit(self, key: str, now: float | None = None) -> RateDecision:
        self.threads.append(threading.current_thread())
        return RateDecision(True, 10, 9, 0.0)


@pytest.mark.parametrize("blocking", [False, True])
def test_the_middleware_runs_only_a_blocking_limiter_in_a_worker_thread(
    docs_index: Path, serve: Any, blocking: bool
) -> None:
    """A non-blocking limiter is asked on the event loop (no thread hop per request);
    one doing I/O in a worker thread, so it never stalls the loop."""
    live = serve(docs_index, rate_limit_per_minute=10)
    limiter = ThreadRecordingLimiter(blocking)
    live.server.config.app.state.serve.limiter = limiter
    with live.client() as c:
        assert c.post("/api/search", json={"query": "chunk size"}).status_code == 200
    (thread,) = limiter.threads
    assert (thread is live.thread) is not blocking  # uvicorn's loop runs in live.thread
