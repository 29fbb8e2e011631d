"""Per-client rate limiting: an exact sliding window, in memory or shared through SQLite.

"10 per minute" means what it says: a request is refused when the client already
made ``limit`` allowed requests in the last ``window`` seconds, and ``Retry-After``
is the time until the oldest of them leaves the window. (A token bucket or GCRA
would let an 11th request in after 6 s, which is not what the setting promises.)

The decision is a pure function of the timestamps a key holds (:func:`decide`);
the two limiters only differ in where those timestamps live:

* :class:`MemoryRateLimiter`: one process (a dict under a lock, idle keys swept);
* :class:`SqliteRateLimiter`: every worker process of ``ragline serve --workers N``
  shares one SQLite file; ``BEGIN IMMEDIATE`` serialises the read-decide-write of
  a hit across processes, and expired rows are deleted as time passes, so the
  table never holds more than ``limit`` rows per client seen in the last window.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ragline.settings import ServeSettings

log = logging.getLogger(__name__)

#: The unit of ``RATE_LIMIT_PER_MINUTE``.
WINDOW_S = 60.0


@dataclass(frozen=True, slots=True)
class RateDecision:
    """The verdict on one request, with what the ``RateLimit-*`` headers need."""

    allowed: bool
    limit: int  # requests per window
    remaining: int  # requests still allowed in the current window (after this one)
    retry_after: float  # seconds until the next request would be allowed (0 if allowed)

    @property
    def retry_after_header(self) -> str:
        """``Retry-After`` as HTTP wants it: whole seconds, rounded up, at least 1."""
        return str(max(1, math.ceil(self.retry_after)))


class RateLimiter(Protocol):
    """Counts a request of ``key`` (a client IP) and says whether it may proceed.

    ``blocking`` says whether :meth:`hit` waits on I/O: the middleware calls a
    non-blocking limiter on the event loop, sparing each request a worker-thread hop."""

    blocking: bool

    def hit(self, key: str, now: float | None = None) -> RateDecision: ...


def decide(
    hits: Sequence[float], now: float, limit: int, window: float = WINDOW_S
) -> tuple[RateDecision, list[float]]:
    """Judge a request at ``now`` given the times of the key's earlier allowed requests.

    Returns the decision and the timestamps to keep (the live ones, plus ``now``
    when allowed). Entries at or before ``now - window`` have expired. A clock
    that went backwards can leave entries "in the future": they still count, and
    the wait is capped at one window.
    """
    if limit < 1:
        raise ValueError(f"rate limit must be at least 1 request per window, not {limit}")
    live = sorted(t for t in hits if t > now - window)
    if len(live) < limit:
        live.append(now)
        return RateDecision(True, limit, limit - len(live), 0.0), live
    # The request becomes possible when the oldest entry that keeps the count at
    # ``limit`` expires: with exactly ``limit`` live entries that is the oldest one.
    oldest = live[len(live) - limit]
    wait = min(window, max(0.0, oldest + window - now))
    return RateDecision(False, limit, 0, wait), live


class UnlimitedRateLimiter:
    """``RATE_LIMIT_PER_MINUTE=0``: every request passes."""

    blocking = False

    def hit(self, key: str, now: float | None = None) -> RateDecision:
        return RateDecision(True, 0, 0, 0.0)


class MemoryRateLimiter:
    """Sliding-window limiter for one process; thread-safe.

    Uses a monotonic clock by default (immune to wall-clock jumps). Keys idle for a
    whole window are swept once per window, so memory follows the number of
    clients of the last minute, not of the process's life.
    """

    blocking = False  # a lock held for microseconds, no I/O

    def __init__(
        self,
        limit: int,
        window: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError(f"rate limit must be at least 1 request per window, not {limit}")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._hits: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._last_sweep = clock()

    def hit(self, key: str, now: float | None = None) -> RateDecision:
        t = self._clock() if now is None else now
        with self._lock:
            if t - self._last_sweep >= self.window:
                self._sweep(t)
            decision, keep = decide(self._hits.get(key, ()), t, self.limit, self.window)
            self._hits[key] = deque(keep, maxlen=self.limit)
            return decision

    def __len__(self) -> int:
        """Number of keys held (for tests and introspection)."""
        with self._lock:
            return len(self._hits)

    def _sweep(self, now: float) -> None:
        cutoff = now - self.window
        for key in [k for k, q in self._hits.items() if not q or q[-1] <= cutoff]:
            del self._hits[key]
        self._last_sweep = now


_SCHEMA = """
CREATE TABLE IF NOT EXISTS rate_hits (key TEXT NOT NULL, ts REAL NOT NULL);
CREATE INDEX IF NOT EXISTS rate_hits_key_ts ON rate_hits (key, ts);
CREATE INDEX IF NOT EXISTS rate_hits_ts ON rate_hits (ts);
"""


class SqliteRateLimiter:
    """Sliding-window limiter whose state is one SQLite file shared by processes.

    Each hit is one ``BEGIN IMMEDIATE`` transaction (write lock taken up front, so
    two workers cannot both read "9 hits" and both allow a 10th): expired rows of
    every key are deleted, the key's live rows read, the decision made by
    :func:`decide` and, when allowed, the hit inserted. Wall-clock time is used,
    since a monotonic clock is not comparable across reboots.

    A storage failure (file gone, lock held past ``timeout_s``) lets the request
    through and logs a warning: the limiter protects the service, it must not
    take it down.
    """

    blocking = True

    def __init__(
        self,
        path: Path,
        limit: int,
        window: float = WINDOW_S,
        *,
        timeout_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if limit < 1:
            raise ValueError(f"rate limit must be at least 1 request per window, not {limit}")
        self.path = Path(path)
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(
            self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as e:
            self._conn.close()
            raise RuntimeError(
                f"RATE_LIMIT_BACKEND {self.path}: cannot use it as a SQLite file: {e}"
            ) from e

    def hit(self, key: str, now: float | None = None) -> RateDecision:
        t = self._clock() if now is None else now
        try:
            with self._lock:
                return self._hit(key, t)
        except sqlite3.Error as e:
            log.warning("rate limiter %s failed, request let through: %s", self.path, e)
            return RateDecision(True, self.limit, self.limit - 1, 0.0)

    def _hit(self, key: str, now: float) -> RateDecision:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM rate_hits WHERE ts <= ?", (now - self.window,))
            rows = conn.execute(
                "SELECT ts FROM rate_hits WHERE key = ? ORDER BY ts", (key,)
            ).fetchall()
            decision, _ = decide([r[0] for r in rows], now, self.limit, self.window)
            if decision.allowed:
                conn.execute("INSERT INTO rate_hits (key, ts) VALUES (?, ?)", (key, now))
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        return decision

    def rows(self) -> int:
        """Rows the table holds now (bounded by ``limit`` x clients of the last window)."""
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM rate_hits").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def make_rate_limiter(settings: ServeSettings) -> RateLimiter:
    """The limiter the settings ask for: none (limit 0), in memory, or a shared file.

    ``RATE_LIMIT_BACKEND`` is ``memory`` or the path of a SQLite file (a
    ``sqlite:///`` URL is accepted too); a relative path is taken from the
    current folder.
    """
    limit = settings.rate_limit_per_minute
    if limit == 0:
        return UnlimitedRateLimiter()
    backend = settings.rate_limit_backend.strip()
    if backend == "memory":
        return MemoryRateLimiter(limit)
    path = backend.removeprefix("sqlite:///") if backend.startswith("sqlite:///") else backend
    if not path or "://" in path:
        raise ValueError(
            f"RATE_LIMIT_BACKEND must be 'memory' or a SQLite file path, not {backend!r}"
        )
    return SqliteRateLimiter(Path(path), limit, timeout_s=settings.rate_limit_timeout_s)
