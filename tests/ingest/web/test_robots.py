"""robots.txt matched as RFC 9309 says (Protego), including the RFC's own examples.

Each test reads its robots.txt through :class:`Robots` as the crawler does; the
standard library's parser (used before) fails the wildcard, ``$`` and longest-match
cases: it reads ``*`` and ``$`` literally and obeys the first matching rule.
"""

from __future__ import annotations

import pytest

from ragline.ingest.web.robots import Robots

AGENT = "ragline/0.1 (+https://github.com/ragline/ragline)"


def robots(text: str, agent: str = AGENT) -> Robots:
    return Robots(lambda url: (200, text), agent)


def test_star_matches_any_run_and_dollar_ends_the_pattern() -> None:
    r = robots("User-agent: *\nDisallow: /*.pdf$\nDisallow: /tmp*/cache\n")
    assert not r.allowed("https://h/a/b.pdf")
    assert not r.allowed("https://h/b.pdf")
    assert r.allowed("https://h/a/b.pdf?download=1")  # $: the path must end there
    assert r.allowed("https://h/a/b.pdfx")
    assert r.allowed("https://h/a/b.html")
    assert not r.allowed("https://h/tmp/cache")
    assert not r.allowed("https://h/tmp-2024/x/cache/page.html")
    assert r.allowed("https://h/tmp/other")


@pytest.mark.parametrize(
    "rules",
    [
        "Allow: /docs/public/\nDisallow: /docs/\n",
        "Disallow: /docs/\nAllow: /docs/public/\n",  # the order does not matter
    ],
)
def test_the_longest_match_wins_whatever_the_order(rules: str) -> None:
    r = robots("User-agent: *\n" + rules)
    assert r.allowed("https://h/docs/public/guide.html")
    assert not r.allowed("https://h/docs/private.html")
    assert r.allowed("https://h/blog/")


def test_allow_wins_a_tie() -> None:
    """RFC 9309 2.2.2: equivalent allow and disallow rules: the allow rule is used."""
    assert robots("User-agent: *\nDisallow: /page\nAllow: /page\n").allowed("https://h/page")


def test_rfc_9309_simple_example() -> None:
    """RFC 9309 section 5.1, for each agent it names and for everyone else."""
    text = (
        "User-Agent: *\n"
        "Disallow: *.gif$\n"
        "Disallow: /example/\n"
        "Allow: /publications/\n"
        "\n"
        "User-Agent: foobot\n"
        "Disallow:/\n"
        "Allow:/example/page.html\n"
        "Allow:/example/allowed.gif\n"
        "\n"
        "User-Agent: barbot\n"
        "User-Agent: bazbot\n"
        "Disallow: /example/page.html\n"
        "\n"
        "User-Agent: quxbot\n"
        "\n"
        "EOF\n"
    )
    paths = ["/", "/a.gif", "/example/page.html", "/example/allowed.gif", "/publications/x"]
    expected = {
        AGENT: [True, False, False, False, True],  # the * group
        "foobot": [False, False, True, True, False],
        "FooBot/2.1": [False, False, True, True, False],  # product token, any case
        "barbot": [True, True, False, True, True],
        "bazbot": [True, True, False, True, True],
        "quxbot": [True, True, True, True, True],  # an empty group allows everything
    }
    for agent, allowed in expected.items():
        r = robots(text, agent)
        assert [r.allowed("https://h" + p) for p in paths] == allowed, agent


def test_rfc_9309_longest_match_example() -> None:
    """RFC 9309 section 5.2."""
    r = robots(
        "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n",
        "foobot",
    )
    assert not r.allowed("https://h/example/page/disallowed.gif")
    assert r.allowed("https://h/example/page/")
    assert r.allowed("https://h/example/page/allowed.gif")


def test_percent_encoding_matches_as_the_rfc_says() -> None:
    """RFC 9309 2.2.2: an encoded unreserved character matches its plain form, a
    UTF-8 character its percent-encoding, and %2A is a literal star."""
    r = robots(
        "User-agent: *\n"
        "Disallow: /foo/bar/%62%61%7A\n"
        "Disallow: /foo/bar/%E3%83%84\n"
        "Disallow: /path/file-with-a-%2A.html\n"
    )
    assert not r.allowed("https://h/foo/bar/baz")
    assert not r.allowed("https://h/foo/bar/%E3%83%84")
    assert not r.allowed("https://h/foo/bar/ツ")
    assert not r.allowed("https://h/path/file-with-a-*.html")
    assert r.allowed("https://h/path/file-with-a-x.html")  # %2A is no wildcard


def test_groups_for_our_agent_merge_and_win_over_star() -> None:
    r = robots(
        "User-agent: *\nDisallow: /\n\n"
        "User-agent: ragline\nDisallow: /drafts/\n\n"
        "User-agent: RAGLINE\nDisallow: /tmp/\n"
    )
    assert r.allowed("https://h/docs/")  # our group, not *, applies
    assert not r.allowed("https://h/drafts/a.html") and not r.allowed("https://h/tmp/a.html")


def test_crawl_delay_and_request_rate() -> None:
    assert robots("User-agent: *\nDisallow: /x\n").delay("https://h/") == 0.0
    assert robots("User-agent: *\nCrawl-delay: 2.5\n").delay("https://h/") == 2.5
    # Request-rate n/s: s/n seconds between requests; the longer of the two wins
    assert robots("User-agent: *\nRequest-rate: 1/5\n").delay("https://h/") == 5.0
    both = "User-agent: *\nCrawl-delay: 2\nRequest-rate: 2/10\n"
    assert robots(both).delay("https://h/") == 5.0
    # per agent: our group's delay, not another's
    per_agent = "User-agent: *\nCrawl-delay: 9\n\nUser-agent: ragline\nCrawl-delay: 1\n"
    assert robots(per_agent).delay("https://h/") == 1.0
    assert robots(per_agent, "otherbot").delay("https://h/") == 9.0


def test_each_site_is_read_once() -> None:
    asked: list[str] = []

    def fetch(url: str) -> tuple[int, str]:
        asked.append(url)
        return 200, "User-agent: *\nDisallow: /*.pdf$\n"

    r = Robots(fetch, AGENT)
    assert r.allowed("https://a/x.html") and not r.allowed("https://a/y.pdf")
    assert r.allowed("https://b:8080/x.html") and r.delay("https://a/z") == 0.0
    assert asked == ["https://a/robots.txt", "https://b:8080/robots.txt"]
