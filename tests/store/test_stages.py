"""Two stages of one search on two threads (store/stages.py): when they overlap, and
that the outcome, errors included, is the sequence's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from ragline.store.stages import StagePair

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
    release.set()
    other.join(WAIT)
    assert outcome == [True]
    assert pair.in_flight == 0
    first, second = meeting()  # and once it is done, the next search overlaps again
    assert pair.run(first, second, 100, 0)[4]


def test_each_stage_reports_its_own_time_when_they_overlap() -> None:
    pair = StagePair(cores=2)
    started = time.perf_counter()
    _, _, a_ms, b_ms, overlapped = pair.run(
        lambda: time.sleep(0.05), lambda: time.sleep(0.03), 100, 0
    )
    wall_ms = (time.perf_counter() - started) * 1e3
    assert overlapped
    assert a_ms >= 50 and b_ms >= 30
    assert wall_ms < a_ms + b_ms  # they ran at the same time


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
