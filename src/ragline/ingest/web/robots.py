"""robots.txt: fetched once per site, matched with the standard library's parser."""

from __future__ import annotations

from collections.abc import Callable
from urllib.robotparser import RobotFileParser

from ragline.ingest.web.urls import origin

#: fetch(url) -> (status, text); status 0 when the site could not be reached.
RobotsFetch = Callable[[str], tuple[int, str]]


def rules_from(status: int, text: str) -> RobotFileParser:
    """The rules a robots.txt answer means (RFC 9309): a 4xx allows everything; an
    unreachable site or a 5xx disallows everything (the server may be overloaded)."""
    parser = RobotFileParser()
    if status == 200:
        parser.parse(text.splitlines())
    elif 400 <= status < 500:
        parser.parse([])
    else:
        parser.parse(["User-agent: *", "Disallow: /"])
    return parser


class Robots:
    """Answers "may this URL be fetched?" for any site, reading each robots.txt once."""

    def __init__(self, fetch: RobotsFetch, user_agent: str) -> None:
        self._fetch = fetch
        self._agent = user_agent
        self._sites: dict[str, RobotFileParser] = {}
        self._status: dict[str, int] = {}

    def rules(self, url: str) -> RobotFileParser:
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
        return self.rules(url).can_fetch(self._agent, url)

    def sitemaps(self, url: str) -> list[str]:
        return list(self.rules(url).site_maps() or [])
