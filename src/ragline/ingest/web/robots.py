"""robots.txt: fetched once per site, matched by Protego as RFC 9309 says.

Python's ``urllib.robotparser`` predates RFC 9309: it reads ``*`` and ``$`` as plain
characters (``Disallow: /*.pdf$`` lets ``/a/b.pdf`` through) and obeys the first
matching rule instead of the longest. Protego implements the RFC's matching: ``*``
and ``$``, the most specific (longest) rule wins, ``Allow`` wins a tie, groups naming
the same agent merge, and the agent is matched by its product token (``ragline`` in
``ragline/0.1 (+https://…)``).
"""

from __future__ import annotations

from collections.abc import Callable

from protego import Protego

from ragline.ingest.web.urls import origin

#: fetch(url) -> (status, text); status 0 when the site could not be reached.
RobotsFetch = Callable[[str], tuple[int, str]]


def rules_from(status: int, text: str) -> Protego:
    """The rules a robots.txt answer means (RFC 9309): a 4xx allows everything; an
    unreachable site or a 5xx disallows everything (the server may be overloaded)."""
    if status == 200:
        return Protego.parse(text)
    if 400 <= status < 500:
        return Protego.parse("")
    return Protego.parse("User-agent: *\nDisallow: /\n")


def delay_of(rules: Protego, user_agent: str) -> float:
    """Seconds to leave between two requests to the site: its ``Crawl-delay``, or the
    interval its ``Request-rate`` (n requests per s seconds) implies, whichever is
    longer; 0 when it asks for neither."""
    delay = float(rules.crawl_delay(user_agent) or 0.0)
    rate = rules.request_rate(user_agent)
    if rate is not None and rate.requests > 0:
        delay = max(delay, rate.seconds / rate.requests)
    return max(delay, 0.0)


class Robots:
    """Answers "may this URL be fetched?" for any site, reading each robots.txt once."""

    def __init__(self, fetch: RobotsFetch, user_agent: str) -> None:
        self._fetch = fetch
        self._agent = user_agent
        self._sites: dict[str, Protego] = {}
        self._status: dict[str, int] = {}

    def rules(self, url: str) -> Protego:
        site = origin(url)
        if site not in self._sites:
            status, text = self._fetch(site + "/robots.txt")
            self._sites[site] = rules_from(status, text)
            self._status[site] = status
        return self._sites[site]

    def unavailable(self, url: str) -> str:
        """Why the site's robots.txt shut everything out ("" when it did not): an
        outage must not read as "every page is gone"."""
        self.rules(url)
        status = self._status[origin(url)]
        if status == 0:
            return "robots.txt could not be fetched (site unreachable)"
        if status >= 500:
            return f"robots.txt answered HTTP {status}"
        return ""

    def allowed(self, url: str) -> bool:
        return bool(self.rules(url).can_fetch(url, self._agent))

    def delay(self, url: str) -> float:
        """Seconds the site asks between two requests (see :func:`delay_of`)."""
        return delay_of(self.rules(url), self._agent)

    def sitemaps(self, url: str) -> list[str]:
        return list(self.rules(url).sitemaps)
