"""The pure parts of the web ingester: URL normal form, scope, links, sitemaps, robots."""

from __future__ import annotations

import pytest

from ragline.ingest.errors import IngestError
from ragline.ingest.web.crawl import CrawledPage
from ragline.ingest.web.fetch import FetchResult, Validators
from ragline.ingest.web.ingest import page_parser
from ragline.ingest.web.links import looks_like_sitemap, page_links, sitemap_entries
from ragline.ingest.web.robots import rules_from
from ragline.ingest.web.urls import chapter_of_url, is_asset, is_url, normalize, scope_of


def test_normalize_makes_spellings_of_one_page_equal() -> None:
    assert normalize("HTTP://Example.ORG:80/a/b.html#frag") == "http://example.org/a/b.html"
    assert normalize("https://example.org") == "https://example.org/"
    assert normalize("../c.html?x=1", "http://h:8080/a/b/") == "http://h:8080/a/c.html?x=1"
    assert is_url("https://h/x") and not is_url("docs/a.md") and not is_url("ftp://h/x")


def test_scope_is_the_start_pages_folder() -> None:
    assert scope_of("http://h/docs/index.html") == "http://h/docs/"
    assert scope_of("http://h/docs/") == "http://h/docs/"
    assert scope_of("http://h/") == "http://h/"
    assert chapter_of_url("http://h/docs/guide/a.html", "http://h/docs/") == "guide"
    assert chapter_of_url("http://h/docs/a.html", "http://h/docs/") == ""
    assert is_asset("http://h/a/logo.PNG") and not is_asset("http://h/a/page")


def test_page_links_canonical_base_and_nofollow() -> None:
    html = """<html><head><base href="/root/"><link rel="canonical" href="page.html">
    </head><body><a href="a.html">a</a><a href="a.html#x">again</a>
    <a href="mailto:x@y">m</a><a rel="nofollow" href="skip.html">s</a>
    <a href="https://other.example/z">z</a></body></html>"""
    found = page_links(html, "http://h/some/where.html?q=1")
    assert found.canonical == "http://h/root/page.html"
    assert found.links == ("http://h/root/a.html", "https://other.example/z")
    assert not found.nofollow


def test_canonical_on_another_site_is_ignored() -> None:
    html = (
        '<link rel="canonical" href="https://evil.example/p">'
        '<meta name="robots" content="noindex, nofollow">'
    )
    found = page_links(html, "http://h/p.html")
    assert found.canonical is None
    assert found.nofollow


def test_sitemap_entries_and_index() -> None:
    urlset = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc> http://h/a.html </loc></url><url><loc>http://h/a.html</loc></url>"
        b"<url><loc>http://other/b.html</loc></url></urlset>"
    )
    assert looks_like_sitemap(urlset)
    assert sitemap_entries(urlset, "http://h/sitemap.xml").pages == ("http://h/a.html",)
    index = (
        b'<?xml version="1.0"?><sitemapindex><sitemap><loc>http://h/s1.xml</loc></sitemap>'
        b"</sitemapindex>"
    )
    assert sitemap_entries(index, "http://h/sitemap.xml").sitemaps == ("http://h/s1.xml",)
    with pytest.raises(ValueError, match="not a sitemap"):
        sitemap_entries(b"<?xml version='1.0'?><rss/>", "http://h/feed.xml")
    with pytest.raises(ValueError, match="not a valid sitemap"):
        sitemap_entries(b"<?xml version='1.0'?><urlset>", "http://h/broken.xml")


def test_robots_answers_follow_rfc_9309() -> None:
    rules = rules_from(200, "User-agent: *\nDisallow: /private/\n")
    assert rules.can_fetch("http://h/public.html", "ragline")
    assert not rules.can_fetch("http://h/private/x.html", "ragline")
    assert rules_from(404, "").can_fetch("http://h/anything", "ragline")  # no robots.txt
    assert not rules_from(503, "").can_fetch("http://h/anything", "ragline")  # overloaded
    assert not rules_from(0, "").can_fetch("http://h/anything", "ragline")  # unreachable


def test_a_markdown_page_with_oversized_front_matter_fails_like_a_file() -> None:
    """Web pages get the files' metadata cap: front matter is copied onto every chunk."""
    body = "---\ntitle: Notes\nnote: " + "x" * 5000 + "\n---\n# Notes\n\nSome text.\n"
    result = FetchResult(
        "https://example.org/notes.md", 200, body.encode(), "text/markdown", "utf-8", Validators()
    )
    page = CrawledPage(result.url, result.url, result, (), "hash")
    assert page_parser(page, max_metadata_bytes=10_000)().title == "Notes"
    with pytest.raises(IngestError, match="RAGLINE_MAX_METADATA_BYTES"):
        page_parser(page, max_metadata_bytes=1_000)()
