"""Two stages of one search on two threads (store/stages.py): when they overlap, and
that the outcome, errors included, is the sequence's."""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ragline.store.stages import SpareCores, StagePair

WAIT = 10.0  # seconds a stage waits for the other before the test calls it a failure


def meeting() -> tuple[Callable[[], str], Callable[[], str]]:
    """Two stages that each finish only once both have started: they can only both
    succeed when they run at the same time."""
    a_started, b_started = threading.Event(), threading.Event()

    def first() -> str:
        a_started.set()
        return threading.current_thread().name if b_started.wait(WAIT) else "alone"

    def second() -> str:
        b_started.set()
        return threading.current_thread().name if a_started.wait(WAIT) else "alone"

    return first, second


def test_big_tables_run_the_first_stage_on_the_worker_meanwhile() -> None:
    pair = StagePair(cores=2)
    first, second = meeting()
    a, b, _, _, overlapped = pair.run(first, second, rows=100, min_rows=100)
    assert overlapped
    assert a.startswith("ragline-stage")
    assert b == threading.current_thread().name
    assert pair.in_flight == 0


@pytest.mark.parametrize(("cores", "rows"), [(2, 99), (1, 100)])
def test_small_tables_and_one_core_run_in_order_on_the_caller(cores: int, rows: int) -> None:
    pair = StagePair(cores=cores)
    order: list[str] = []

    def stage(name: str) -> Callable[[], str]:
        def run() -> str:
            order.append(name)
            return threading.current_thread().name

        return run

    a, b, _, _, overlapped = pair.run(stage("first"), stage("second"), rows, 100)
    assert not overlapped
    assert order == ["first", "second"]
    assert a == b == threading.current_thread().name


def test_a_search_in_flight_makes_the_next_one_sequential() -> None:
    """Concurrent searches keep the cores busy already: the second runs in order."""
    pair = StagePair(cores=2)
    release = threading.Event()
    outcome: list[bool] = []

    def slow() -> None:
        outcome.append(pair.run(lambda: None, lambda: release.wait(WAIT), 100, 0)[4])

    other = threading.Thread(target=slow)
    other.start()
    deadline = time.monotonic() + WAIT
    while pair.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert pair.in_flight == 1
    *_, overlapped = pair.run(lambda: 1, lambda: 2, 100, 0)
    assert not overlapped
    assert pair.runs == (1, 1)
    release.set()
    other.join(WAIT)
    assert outcome == [True]
    assert pair.in_flight == 0
    first, second = meeting()  # and once it is done, the next search overlaps again
    assert pair.run(first, second, 100, 0)[4]


def test_each_stage_reports_its_own_time_when_they_overlap() -> None:
    """The caller's stage is not charged the wait for the worker's."""
    pair = StagePair(cores=2)
    _, _, a_ms, b_ms, overlapped = pair.run(
        lambda: time.sleep(0.2), lambda: time.sleep(0.01), 100, 0
    )
    assert overlapped
    assert a_ms >= 200
    assert 10 <= b_ms < 200


class FirstFailed(Exception):
    pass


class SecondFailed(Exception):
    pass


def fail(exc: type[Exception]) -> Callable[[], None]:
    def run() -> None:
        raise exc("stage failed")

    return run


@pytest.mark.parametrize("min_rows", [0, 10**9], ids=["parallel", "sequential"])
@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (fail(FirstFailed), lambda: 2, FirstFailed),
        (lambda: 1, fail(SecondFailed), SecondFailed),
        (fail(FirstFailed), fail(SecondFailed), FirstFailed),  # the sequence stops at the first
    ],
)
def test_errors_are_the_sequences(
    first: Callable[[], object],
    second: Callable[[], object],
    expected: type[Exception],
    min_rows: int,
) -> None:
    pair = StagePair(cores=2)
    with pytest.raises(expected):
        pair.run(first, second, 100, min_rows)
    assert pair.in_flight == 0
    assert pair.run(lambda: 1, lambda: 2, 100, min_rows)[:2] == (1, 2)  # still usable


def test_a_failing_second_stage_waits_for_the_first() -> None:
    """The caller's error is raised only after the worker's stage has finished, so no
    stage of a search outlives its call."""
    pair = StagePair(cores=2)
    finished = threading.Event()

    def first() -> None:
        time.sleep(0.05)
        finished.set()

    with pytest.raises(SecondFailed):
        pair.run(first, fail(SecondFailed), 100, 0)
    assert finished.is_set()


def stat_file(path: Path, busy_ticks: int, cpus: int = 2) -> Path:
    """A /proc/stat in the kernel's format: ``busy_ticks`` spread over user and system."""
    user, system = busy_ticks - busy_ticks // 3, busy_ticks // 3
    head = f"cpu  {user} 0 {system} 500000 100 0 0 0 0 0"
    rows = [f"cpu{i} {user // cpus} 0 {system // cpus} 250000 50 0 0 0 0 0" for i in range(cpus)]
    path.write_text("\n".join([head, *rows, "intr 1 2 3", "ctxt 42"]) + "\n")
    return path


def test_spare_cores_follow_other_processes_busy_time(tmp_path: Path) -> None:
    stat = stat_file(tmp_path / "stat", 1000)
    cores = SpareCores(2, window=0.0, stat=stat)
    assert cores.spare() is None  # one reading is no rate yet
    time.sleep(0.2)
    idle = cores.spare()  # nobody used a tick
    assert idle is not None and 1.8 <= idle <= 2.0
    stat_file(stat, 1000 + 4000)  # 40 core-seconds in a fraction of a second: all busy
    time.sleep(0.05)
    busy = cores.spare()
    assert busy is not None and busy < 0


def test_the_workers_own_cpu_time_is_not_counted_as_busy(tmp_path: Path) -> None:
    """A core that only the stage worker kept busy is there for the next search's
    second stage."""
    stat = stat_file(tmp_path / "stat", 1000)
    cores = SpareCores(2, window=0.0, stat=stat)
    cores.spare(worker_cpu=3.0)
    stat_file(stat, 1000 + 4000)  # 40 core-seconds busy ...
    time.sleep(0.05)
    spare = cores.spare(worker_cpu=3.0 + 40.0)  # ... all of them in the worker
    assert spare is not None and spare >= 1.8


def test_a_pair_counts_the_cpu_time_of_its_worker() -> None:
    pair = StagePair(cores=2)

    def spin() -> None:
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass

    pair.run(spin, spin, 100, 0)  # overlapped: the first stage ran on the worker
    assert 0.05 <= pair.worker_cpu < 0.1
    before = pair.worker_cpu
    pair.run(spin, spin, 100, 10**9)  # in order: the worker did nothing
    assert pair.worker_cpu == before


def test_spare_cores_are_read_once_per_window_and_unknown_without_proc(tmp_path: Path) -> None:
    stat = stat_file(tmp_path / "stat", 1000)
    cores = SpareCores(2, window=60.0, stat=stat)
    cores.spare()
    stat.unlink()
    assert cores.spare() is None  # within the window: the last answer, no read
    assert SpareCores(2, window=0.0, stat=tmp_path / "missing").spare() is None
    stat.write_text("not the kernel's format\n")
    assert SpareCores(2, window=0.0, stat=stat).spare() is None


def test_busy_cores_elsewhere_make_the_search_sequential(tmp_path: Path) -> None:
    stat = stat_file(tmp_path / "stat", 1000)
    pair = StagePair(cores=2, spare=SpareCores(2, window=0.0, stat=stat))
    pair.load.spare()  # type: ignore[union-attr]
    time.sleep(0.05)
    first, second = meeting()
    assert pair.run(first, second, 100, 0)[4]  # the other core idle: overlapped
    stat_file(stat, 1000 + 4000)
    time.sleep(0.05)
    assert not pair.run(lambda: 1, lambda: 2, 100, 0)[4]


def test_a_forked_child_gets_a_worker_of_its_own() -> None:
    """A server that searched before forking its workers: the child's overlapped
    stages still run (the parent's worker thread does not exist in the child)."""
    pair = StagePair(cores=2)
    first, second = meeting()
    assert pair.run(first, second, 100, 0)[4]  # the parent's worker now exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running pytest's exit hooks
        try:
            a, b = meeting()
            ok = pair.run(a, b, 100, 0)
            os.write(write, b"ok" if ok[4] and ok[0] != "alone" else b"no")
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 3 * WAIT)
        got = os.read(read, 2) if ready else b"hung"
    finally:
        if not ready:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
    assert got == b"ok"
