"""`ragline ingest https://…` against a real HTTP server on 127.0.0.1, real index, real model."""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

from typer.testing import CliRunner

from ragline.cli import app
from ragline.engine import Ragline

from .conftest import Site

LINKED = {
    "/docs/index.html",
    "/docs/guide/install.html",
    "/docs/guide/usage.html",  # linked as usage.html?ref=nav, indexed under its canonical URL
    "/docs/faq.html",
    "/docs/deep/level2.html",
    "/docs/deep/level3.html",  # depth 3: the last level within max_depth=3
}


def sources(rag: Ragline, site: Site) -> set[str]:
    prefix = site.url("")
    return {d.source.removeprefix(prefix) for d in rag.store.documents("default")}


def test_crawl_ingests_every_linked_page_within_the_limits(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    report = rag.ingest(site.url("/docs/index.html"), max_depth=3, max_pages=50)
    assert report.failed == []
    assert sources(rag, site) == LINKED
    assert report.crawl["mode"] == "crawl"
    assert report.crawl["fetched"] == len(LINKED)
    assert report.crawl["blocked_by_robots"] == [site.url("/docs/private/secret.html")]
    assert report.crawl["truncated"] is False
    fetched = {p for p, _ in site.log}
    # robots.txt read; nothing disallowed, out of scope, too deep or an asset was fetched
    assert "/robots.txt" in fetched
    assert not fetched & {
        "/docs/private/secret.html",
        "/other/outside.html",
        "/docs/deep/level4.html",
        "/docs/style.css",
    }
    hit = rag.search("how often is the foghorn sounded?", top_k=1).hits[0].chunk
    assert hit.source == site.url("/docs/guide/usage.html")  # the canonical URL
    assert hit.url.startswith(site.url("/docs/guide/usage.html"))
    install = rag.search("trim the paraffin wick", top_k=1).hits[0].chunk
    assert install.section == "Wicks"
    assert install.url == site.url("/docs/guide/install.html#wicks")
    assert install.chapter == "guide"


def test_recrawl_of_an_unchanged_site_embeds_nothing(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    first = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert first.chunks_embedded > 0
    site.clear_log()
    again = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert again.failed == [] and again.indexed == [] and again.deleted == []
    assert again.chunks_embedded == 0
    assert again.crawl["not_modified"] == len(LINKED)
    assert len(site.statuses(304)) == len(LINKED)  # every page asked "changed?"
    assert site.statuses(200) == []  # and none was sent again
    assert sources(rag, site) == LINKED  # 304 pages' links were still followed


def test_recrawl_with_last_modified_only(make_rag: Callable[..., Ragline], site: Site) -> None:
    site.etag = False
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    site.clear_log()
    site.edit("/docs/faq.html", "every second Tuesday", "every third Friday")
    again = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert len(site.statuses(304)) == len(LINKED) - 1  # If-Modified-Since answered
    assert site.statuses(200) == ["/docs/faq.html"]
    assert again.indexed == [site.url("/docs/faq.html")] and again.chunks_embedded >= 1


def test_recrawl_without_validators_skips_by_content_hash(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    site.validators = False
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    site.clear_log()
    again = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert len(site.statuses(200)) == len(LINKED)  # no ETag: every body comes again
    assert again.indexed == [] and again.chunks_embedded == 0
    assert len(again.skipped) == len(LINKED)


def test_recrawl_reindexes_a_changed_page_and_deletes_a_gone_one(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    site.edit("/docs/faq.html", "every second Tuesday", "every first Monday by helicopter")
    del site.pages["/docs/deep/level3.html"]
    again = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert again.indexed == [site.url("/docs/faq.html")]
    assert again.deleted == [site.url("/docs/deep/level3.html")]
    assert again.chunks_embedded >= 1
    assert sources(rag, site) == LINKED - {"/docs/deep/level3.html"}
    hit = rag.search("relieved by helicopter", top_k=1).hits[0].chunk
    assert "helicopter" in hit.text


def test_page_limit_stops_the_crawl_and_deletes_nothing(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    cut = rag.ingest(site.url("/docs/index.html"), max_depth=3, max_pages=2)
    assert cut.crawl["truncated"] is True
    assert cut.crawl["not_modified"] + cut.crawl["fetched"] == 2
    assert cut.deleted == []  # unreached pages are not gone
    assert sources(rag, site) == LINKED


def test_one_page_and_a_sitemap(make_rag: Callable[..., Ragline], site: Site) -> None:
    rag = make_rag()
    one = rag.ingest(site.url("/docs/faq.html"), max_depth=0)
    assert one.crawl["mode"] == "page"
    assert sources(rag, site) == {"/docs/faq.html"}
    mapped = make_rag(index=rag.settings.index_dir.parent / "sitemap-index")
    report = mapped.ingest(site.url("/docs/sitemap.xml"))
    assert report.crawl["mode"] == "sitemap"
    # the listed pages, except the one robots.txt disallows; no links followed
    assert sources(mapped, site) == {"/docs/faq.html", "/docs/deep/level4.html"}
    assert report.crawl["blocked_by_robots"] == [site.url("/docs/private/secret.html")]


def test_one_page_ingest_leaves_the_rest_of_the_site(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    site.edit("/docs/faq.html", "every second Tuesday", "every third Friday")
    one = rag.ingest(site.url("/docs/faq.html"), max_depth=0)
    assert one.indexed == [site.url("/docs/faq.html")] and one.deleted == []
    assert sources(rag, site) == LINKED
    del site.pages["/docs/faq.html"]
    gone = rag.ingest(site.url("/docs/faq.html"), max_depth=0)
    assert gone.deleted == [site.url("/docs/faq.html")]
    assert sources(rag, site) == LINKED - {"/docs/faq.html"}


def test_an_outage_deletes_nothing(make_rag: Callable[..., Ragline], site: Site) -> None:
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    # a page fetched under another URL than its canonical one fails: its document stays
    site.failing["/docs/guide/usage.html"] = 500
    partial = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert [f.path for f in partial.failed] == [site.url("/docs/guide/usage.html?ref=nav")]
    assert "HTTP 500" in partial.failed[0].reason and partial.deleted == []
    assert sources(rag, site) == LINKED
    # the whole site down (robots.txt answers 503): nothing fetched, nothing deleted
    site.failing["/robots.txt"] = 503
    down = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert down.deleted == [] and down.crawl["blocked_by_robots"] == []
    assert "robots.txt answered HTTP 503" in down.failed[0].reason
    assert sources(rag, site) == LINKED


def test_robots_txt_is_matched_as_rfc_9309_says_and_its_crawl_delay_kept(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    """The longest rule wins over an earlier shorter one, ``*`` and ``$`` are patterns
    (the standard library's parser got both wrong), and Crawl-delay spaces the
    requests as the server saw them."""
    site.pages["/robots.txt"] = (
        "text/plain",
        "User-agent: *\n"
        "Disallow: /docs/private/\n"
        "Disallow: /*/level3.html$\n"
        "Allow: /docs/private/secret.html\n"
        "Crawl-delay: 0.3\n",
    )
    rag = make_rag()
    report = rag.ingest(site.url("/docs/index.html"), max_depth=3, max_pages=50)
    assert report.failed == []
    assert report.crawl["blocked_by_robots"] == [site.url("/docs/deep/level3.html")]
    expected = (LINKED - {"/docs/deep/level3.html"}) | {"/docs/private/secret.html"}
    assert sources(rag, site) == expected
    arrivals = [t for path, t in site.times if path != "/robots.txt"]
    assert len(arrivals) == len(expected)
    assert min(b - a for a, b in pairwise(arrivals)) >= 0.3


def test_a_crawl_delay_over_the_cap_fetches_one_page_and_deletes_nothing(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    rules = "User-agent: *\nDisallow: /docs/private/\nCrawl-delay: {}\n"
    site.pages["/robots.txt"] = ("text/plain", rules.format(120))
    site.clear_log()
    report = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert [p for p, _ in site.log if p != "/robots.txt"] == ["/docs/index.html"]
    assert report.deleted == [] and report.failed
    assert all("RAGLINE_WEB_MAX_CRAWL_DELAY_S=30" in f.reason for f in report.failed)
    assert sources(rag, site) == LINKED
    # the cap is a setting: a delay over it fails the later pages, one under it is kept
    site.pages["/robots.txt"] = ("text/plain", rules.format(0.2))
    strict = make_rag(rag.settings.index_dir, web_max_crawl_delay_s=0.1)
    failed = strict.ingest(site.url("/docs/index.html"), max_depth=3).failed
    assert failed and all("RAGLINE_WEB_MAX_CRAWL_DELAY_S=0.1" in f.reason for f in failed)
    patient = make_rag(rag.settings.index_dir, web_max_crawl_delay_s=1)
    assert patient.ingest(site.url("/docs/index.html"), max_depth=3).failed == []
    assert sources(patient, site) == LINKED


def test_fetch_failures_are_reported_and_keep_the_index(
    make_rag: Callable[..., Ragline], site: Site
) -> None:
    rag = make_rag()
    rag.ingest(site.url("/docs/index.html"), max_depth=3)
    site.pages["/docs/faq.html"] = ("application/zip", "PK\x03\x04 not a document")
    report = rag.ingest(site.url("/docs/index.html"), max_depth=3)
    assert [f.path for f in report.failed] == [site.url("/docs/faq.html")]
    assert "unsupported content type 'application/zip'" in report.failed[0].reason
    assert sources(rag, site) == LINKED  # the old FAQ stays indexed


def test_cli_ingests_a_url(site: Site, tmp_path: Path) -> None:
    index = tmp_path / "idx"
    url = site.url("/docs/index.html")
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["ingest", url, "--index", str(index), "--max-depth", "1", "--max-pages", "3", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["crawl"]["fetched"] == 3 and report["crawl"]["truncated"] is True
    text = runner.invoke(app, ["ingest", url, "--index", str(index), "--max-depth", "1"])
    assert text.exit_code == 0, text.output
    assert "not modified (304)" in text.stdout
