"""PacedFetcher: each site's Crawl-delay kept between requests, the cap enforced.

The pacing is observed with an injected clock and sleep (a wait is time passing, not
a result); tests/ingest/web/test_web_ingest.py checks it against a real server."""

from __future__ import annotations

from itertools import pairwise

import pytest

from ragline.ingest.web.fetch import FetchError, FetchResult, Validators
from ragline.ingest.web.pace import PacedFetcher

DELAYS = {"https://slow": 2.0, "https://fast": 0.0, "https://greedy": 90.0}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Pages:
    """A fetcher whose every request takes ``took`` seconds on the clock."""

    def __init__(self, clock: Clock, took: float = 0.5) -> None:
        self.clock = clock
        self.took = took
        self.got: list[tuple[str, float]] = []

    def get(self, url: str, validators: Validators | None = None) -> FetchResult:
        self.got.append((url, self.clock.now))
        self.clock.now += self.took
        return FetchResult(url, 200, b"<p>x</p>", "text/html", "utf-8", Validators())


def paced(clock: Clock, pages: Pages, cap: float = 30.0) -> PacedFetcher:
    def delay(url: str) -> float:
        return next(d for site, d in DELAYS.items() if url.startswith(site))

    return PacedFetcher(pages, delay, cap, clock=clock.time, sleep=clock.sleep)


def test_the_delay_runs_from_the_end_of_the_last_request_to_that_site() -> None:
    clock = Clock()
    pages = Pages(clock)
    fetcher = paced(clock, pages)
    fetcher.get("https://slow/a")  # first request to a site: no wait
    fetcher.get("https://slow/b")
    fetcher.get("https://fast/a")  # another site: its own (zero) delay
    clock.now += 5.0  # a long pause: nothing left to wait
    fetcher.get("https://slow/c")
    fetcher.get("https://slow/d")
    assert clock.slept == [2.0, 2.0]
    starts = [t for url, t in pages.got if url.startswith("https://slow")]
    assert [b - a for a, b in pairwise(starts)] == [2.5, 6.0, 2.5]


def test_a_failed_request_counts_as_a_request() -> None:
    clock = Clock()

    class Failing(Pages):
        def get(self, url: str, validators: Validators | None = None) -> FetchResult:
            super().get(url, validators)
            raise FetchError("HTTP 500", 500)

    fetcher = paced(clock, Failing(clock))
    with pytest.raises(FetchError):
        fetcher.get("https://slow/a")
    with pytest.raises(FetchError):
        fetcher.get("https://slow/b")
    assert clock.slept == [2.0]


def test_a_delay_over_the_cap_is_not_waited_out() -> None:
    clock = Clock()
    pages = Pages(clock)
    fetcher = paced(clock, pages, cap=30.0)
    fetcher.get("https://greedy/a")  # the first page goes through
    with pytest.raises(FetchError, match=r"90 s between.*RAGLINE_WEB_MAX_CRAWL_DELAY_S=30"):
        fetcher.get("https://greedy/b")
    assert [u for u, _ in pages.got] == ["https://greedy/a"] and clock.slept == []
    fetcher.get("https://slow/a")  # other sites are not held up
    assert paced(clock, Pages(clock), cap=90.0).get("https://greedy/a").status == 200
