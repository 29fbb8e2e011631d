"""Two independent stages of one search run on two cores, when a core is free.

The in-process mirror's hybrid search is a vector scan and a BM25 top-k over the
same snapshot; neither needs the other's result. Their numpy and SIMD kernels
release the GIL (benchmarks/results/parallel_stages.md), so the first can run on a
long-lived worker thread while the caller runs the second, and one search takes
about the longer stage instead of their sum. Handing a stage to the worker costs
tens of microseconds and the two stages contend for the GIL between kernels, so
this pays only on big tables (``min_rows``), and only while this search is the
only one in flight in the process and the second core is idle (no other process,
no query embedding of a busy server on it): under concurrent work the cores are
busy already, and hand-offs would cost throughput for no latency gained.

The result is the same as running the stages one after the other, exceptions
included: the first stage's error wins, as it would have stopped the sequence.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

#: Rows from which a search's two stages run concurrently by default (the setting
#: ``lance_parallel_rows``; chosen in benchmarks/results/parallel_stages.md).
PARALLEL_MIN_ROWS = 100_000

#: Idle cores from which a search's stages overlap: with less, other work (other
#: processes, this one's other threads) holds the core the worker would wait for
#: (parallel_stages.md).
MIN_SPARE = 0.5

_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0

A = TypeVar("A")
B = TypeVar("B")


def free_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class SpareCores:
    """Cores idle lately had the stage worker not run: every core's busy time from
    ``/proc/stat`` less the worker's own CPU time (the caller counts it), read at
    most once per ``window`` seconds (about 30 µs a read). Other processes count as
    busy, and so do this process's threads, the searching one included (its query
    embedding, a loaded server's other requests): a core idle besides all of them
    is one the worker would get at once. None where ``/proc/stat`` is missing (not
    Linux): then nothing is known to be busy. A container's CPU quota is not read."""

    def __init__(self, cores: int, window: float = 0.25, stat: Path = Path("/proc/stat")) -> None:
        self.cores = cores
        self.window = window
        self.stat = stat
        self._last: tuple[float, float, float] | None = None  # (wall, all busy, worker)
        self._spare: float | None = None

    def _read(self) -> tuple[int, float] | None:
        """(cpus listed, seconds every cpu was busy since boot)."""
        try:
            lines = self.stat.read_text().splitlines()
        except OSError:
            return None
        head = lines[0].split() if lines else []
        if len(head) < 5 or head[0] != "cpu":
            return None
        ticks = [int(x) for x in head[1:]]
        busy = sum(ticks[:3]) + sum(ticks[5:8])  # user nice system · irq softirq steal
        cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
        return max(cpus, 1), busy / _TICKS

    def spare(self, worker_cpu: float = 0.0) -> float | None:
        """Cores idle over the last window but for the worker (negative when work
        queues for the cores); ``worker_cpu``: CPU seconds the worker took so far (a
        running total)."""
        now = time.monotonic()
        last = self._last
        if last is not None and now - last[0] < self.window:
            return self._spare
        read = self._read()
        if read is None:
            return None
        cpus, busy = read
        self._last = (now, busy, worker_cpu)
        if last is None:
            return None
        wall = now - last[0]
        others = max(0.0, (busy - last[1]) - (worker_cpu - last[2])) / wall
        self._spare = min(float(self.cores), float(cpus)) - others
        return self._spare


class StagePair:
    """Runs ``first`` and ``second`` of a search concurrently or one after the other,
    and counts the searches in flight to decide. One worker thread, made on first
    use and shared by every search through this object (thread-safe)."""

    def __init__(self, cores: int | None = None, spare: SpareCores | None = None) -> None:
        self.cores = free_cores() if cores is None else cores
        #: Other processes' load; None: not looked at (the stages overlap regardless).
        self.load = spare
        self._lock = threading.Lock()
        self._in_flight = 0
        self._worker_cpu = 0.0  # CPU seconds the worker spent in stages
        self._runs = [0, 0]  # searches run in order, overlapped
        self._worker: ThreadPoolExecutor | None = None
        self._worker_pid = 0

    @property
    def in_flight(self) -> int:
        """Searches now inside :meth:`run`."""
        return self._in_flight

    @property
    def runs(self) -> tuple[int, int]:
        """(searches whose stages ran in order, searches whose stages overlapped)."""
        return self._runs[0], self._runs[1]

    @property
    def worker_cpu(self) -> float:
        """CPU seconds the worker thread spent in stages so far."""
        return self._worker_cpu

    def run(
        self,
        first: Callable[[], A],
        second: Callable[[], B],
        rows: int,
        min_rows: int,
    ) -> tuple[A, B, float, float, bool]:
        """(first's result, second's, first's ms, second's ms, whether they overlapped):
        concurrently when the table has ``min_rows`` rows or more, the process has a
        second core, no other search is in flight here and a core was idle lately
        besides everything but the worker (:class:`SpareCores`); else in order."""
        with self._lock:
            self._in_flight += 1
            parallel = (
                self._in_flight == 1 and self.cores >= 2 and rows >= min_rows and self._spare_core()
            )
            worker = self._pool() if parallel else None
            self._runs[parallel] += 1
        cpu: list[float] = []  # the worker's stage CPU seconds
        try:
            if worker is None:
                t0 = time.perf_counter()
                a = first()
                t1 = time.perf_counter()
                b = second()
                t2 = time.perf_counter()
                return a, b, (t1 - t0) * 1e3, (t2 - t1) * 1e3, False
            return self._overlapped(worker, first, second, cpu)
        finally:
            with self._lock:
                self._in_flight -= 1
                self._worker_cpu += sum(cpu)

    @staticmethod
    def _overlapped(
        worker: ThreadPoolExecutor,
        first: Callable[[], A],
        second: Callable[[], B],
        cpu: list[float],
    ) -> tuple[A, B, float, float, bool]:
        """``first`` on the worker, ``second`` here; the worker's CPU seconds are
        appended to ``cpu``."""

        def timed() -> tuple[A, float]:
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                out = first()
            finally:
                cpu.append(time.thread_time() - c0)
            return out, (time.perf_counter() - t0) * 1e3

        pending: Future[tuple[A, float]] = worker.submit(timed)
        t0 = time.perf_counter()
        try:
            b = second()
        except BaseException:
            # the first stage's outcome comes first, as in the sequence; never leave
            # it running past this call
            pending.result()
            raise
        b_ms = (time.perf_counter() - t0) * 1e3
        a, a_ms = pending.result()
        return a, b, a_ms, b_ms, True

    def _spare_core(self) -> bool:
        spare = self.load.spare(self._worker_cpu) if self.load is not None else None
        return spare is None or spare >= MIN_SPARE

    def _pool(self) -> ThreadPoolExecutor:
        """The worker, made anew in a forked child (a fork copies no threads, and the
        parent's pool would queue the child's stages for a thread that is not there)."""
        if self._worker is None or self._worker_pid != os.getpid():
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="ragline-stage")
            self._worker_pid = os.getpid()
        return self._worker


#: The process's pair runner: cores and the searches in flight are the process's.
STAGES = StagePair(spare=SpareCores(free_cores()))
