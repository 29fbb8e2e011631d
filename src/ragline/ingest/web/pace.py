"""Polite pacing: wait between two requests to one site as its robots.txt asks.

The crawl fetches one page after the other; :class:`PacedFetcher` sits between it and
the real fetcher and sleeps until the site's ``Crawl-delay`` (or ``Request-rate``
interval) has passed since the previous request to that site ended. A delay longer
than the configured cap is not waited out (a run would stall for hours): the first
request to such a site goes through, the later ones fail with the reason named, and
failed pages keep their documents, so nothing is lost.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ragline.ingest.web.crawl import PageFetcher
from ragline.ingest.web.fetch import FetchError, FetchResult, Validators
from ragline.ingest.web.urls import origin


class PacedFetcher:
    """A :class:`~ragline.ingest.web.crawl.PageFetcher` that keeps each site's delay.

    ``delay(url)`` gives the seconds the URL's site asks for between requests;
    ``clock`` and ``sleep`` are injectable so the waiting can be observed."""

    def __init__(
        self,
        fetcher: PageFetcher,
        delay: Callable[[str], float],
        max_delay_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._fetcher = fetcher
        self._delay = delay
        self._max = max_delay_s
        self._clock = clock
        self._sleep = sleep
        self._last: dict[str, float] = {}  # site -> when its last request ended

    def get(self, url: str, validators: Validators | None = None) -> FetchResult:
        site = origin(url)
        last = self._last.get(site)
        if last is not None:
            wait = self._delay(url)
            if wait > self._max:
                raise FetchError(
                    f"robots.txt asks for {wait:g} s between requests, over "
                    f"RAGLINE_WEB_MAX_CRAWL_DELAY_S={self._max:g}: not fetched this run"
                )
            remaining = last + wait - self._clock()
            if remaining > 0:
                self._sleep(remaining)
        try:
            return self._fetcher.get(url, validators)
        finally:
            self._last[site] = self._clock()
