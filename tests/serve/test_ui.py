"""The web chat UI in a real browser: Playwright drives Debian's Chromium (headless)
against the real ragline app, served by uvicorn on 127.0.0.1 over an index of the
repo's docs/ (real model, extractive generator).

Chromium is never downloaded: the tests use /usr/bin/chromium (``.ci/run`` installs
Debian's package) and fail, not skip, when it is missing. Set
RAGLINE_UPDATE_SCREENSHOT=1 to rewrite docs/images/ui.png, the README's screenshot.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import pytest
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

from ragline.serve.auth import KeyStore
from ragline.settings import Settings


class LiveServer(Protocol):
    """What the tests use of conftest's LiveServer."""

    url: str
    settings: Settings


REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("RAGLINE_CHROMIUM", "/usr/bin/chromium"))
# Without the background-networking flags Chromium keeps dialling Google's hosts,
# which this machine's closed network refuses.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = REPO / "docs" / "images" / "ui.png"
QUESTION = "how are deleted files removed from the index?"
OFF_TOPIC = "what is the capital of France?"
TIMEOUT_MS = 60_000
# expect()'s own default is 5 s, which an answer on a busy 2-core machine can exceed:
# waits are not speed checks.
expect.set_options(timeout=TIMEOUT_MS)


# --- servers ------------------------------------------------------------------------
# tests/serve/conftest.py: `docs_server` (the real app under uvicorn on 127.0.0.1 over
# an index of docs/, rate limit off) and `serve` (the same with settings overrides).


@pytest.fixture(scope="module")
def server(docs_server: LiveServer) -> str:
    assert docs_server.settings.generator == "extractive"
    return f"{docs_server.url}/"


class SlowLLM:
    """An OpenAI-compatible endpoint (protocol-level fake) that streams one word every
    ``gap`` seconds for a long time, and notes when its client goes away."""

    def __init__(self, words: int = 200, gap: float = 0.2) -> None:
        self.words, self.gap = words, gap
        self.requests = 0
        self.disconnected = threading.Event()
        handler = self._handler()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                llm.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    for i in range(llm.words):
                        word = "Deleted files lose their chunks [1]. " if i == 0 else "more "
                        delta = {"choices": [{"index": 0, "delta": {"content": word}}]}
                        self.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
                        self.wfile.flush()
                        time.sleep(llm.gap)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    llm.disconnected.set()

        return Handler

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --- browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} not found: the browser tests need Debian's Chromium "
            "(apt-get install -y --no-install-recommends chromium)"
        )
    # launch() gives every run a fresh, empty user-data-dir of its own.
    b = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
    yield b
    b.close()


@contextmanager
def open_page(browser: Browser, url: str, **context: Any) -> Iterator[Page]:
    """A page in a fresh context (empty localStorage); page errors fail the test."""
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(url)
        yield page
        assert errors == [], f"JavaScript errors on the page: {errors}"
    finally:
        ctx.close()


# --- helpers ------------------------------------------------------------------------

RECORDER = """() => {
  window.__samples = [];
  const log = document.getElementById("messages");
  new MutationObserver(() => {
    const all = log.querySelectorAll(".msg-assistant");
    const last = all[all.length - 1];
    if (!last) return;
    window.__samples.push({
      state: last.dataset.state,
      busy: last.getAttribute("aria-busy"),
      len: last.querySelector(".answer")?.textContent.length ?? 0,
      stop: !document.getElementById("stop").hidden,
    });
  }).observe(log, { childList: true, subtree: true, characterData: true, attributes: true });
}"""


def sse_events(body: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of an event-stream body."""
    out = []
    for block in re.split(r"\r?\n\r?\n", body):
        name, data = "message", []
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            out.append((name, json.loads("\n".join(data))))
    return out


def ask(page: Page, question: str) -> list[tuple[str, dict[str, Any]]]:
    """Type ``question``, send it with Enter, wait for the answer; the SSE events."""
    count = page.locator(".msg-assistant").count()
    page.fill("#question", question)
    with page.expect_response(lambda r: r.url.endswith("/api/chat")) as info:
        page.press("#question", "Enter")
    done = page.locator(".msg-assistant").nth(count)
    expect(done).to_have_attribute("data-state", re.compile("done|error|stopped"))
    response = info.value
    assert response.status == 200, response.text()
    return sse_events(response.text())


def no_markers(text: str) -> str:
    """Answer text as a reader sees it, minus citation markers, code ticks and spaces."""
    return re.sub(r"\s+", "", re.sub(r"\[\d+(?:,\s*\d+)*\]|`", "", text))


def visible_answer_text(page: Page, nth: int) -> str:
    return str(
        page.locator(".msg-assistant .answer")
        .nth(nth)
        .evaluate(
            """(el) => { const c = el.cloneNode(true);
                 c.querySelectorAll(".cites").forEach((n) => n.remove());
                 return c.textContent; }"""
        )
    )


def no_horizontal_overflow(page: Page) -> None:
    sizes = page.evaluate(
        """() => [document.documentElement.scrollWidth, document.documentElement.clientWidth,
                  document.body.scrollWidth, document.getElementById("thread").scrollWidth,
                  document.getElementById("thread").clientWidth, window.innerWidth]"""
    )
    doc_w, doc_cw, body_w, thread_w, thread_cw, inner = sizes
    assert doc_w <= doc_cw and body_w <= inner, sizes
    assert thread_w <= thread_cw, sizes


# --- tests --------------------------------------------------------------------------


def test_chat_streams_cites_and_opens_passage(
    browser: Browser, server: str, docs_index: Path
) -> None:
    with open_page(browser, server, viewport={"width": 1280, "height": 800}) as page:
        expect(page.locator("#question")).to_be_focused()
        assert page.get_attribute("#messages", "aria-live") == "polite"
        page.evaluate(RECORDER)
        events = ask(page, QUESTION)

        names = [e for e, _ in events]
        assert names[-1] == "done" and names.count("token") >= 2, names
        done = events[-1][1]
        answer = done["answer"]
        msg = page.locator(".msg-assistant").first
        expect(msg).to_have_attribute("data-state", "done")
        expect(msg).to_have_attribute("aria-busy", "false")

        # Tokens arrived one by one: the answer grew while the message was streaming,
        # with the stop button shown, before the final render.
        samples = page.evaluate("window.__samples")
        streaming = [s for s in samples if s["state"] == "streaming" and s["len"] > 0]
        lengths = sorted({s["len"] for s in streaming})
        assert len(lengths) >= 2, samples
        assert [s["len"] for s in streaming] == sorted(s["len"] for s in streaming)
        assert all(s["busy"] == "true" for s in streaming)
        assert any(s["stop"] for s in streaming)
        expect(page.locator("#stop")).to_be_hidden()
        assert no_markers(visible_answer_text(page, 0)) == no_markers(answer["answer"])

        # Confidence level as the server gave it, its meaning in plain words; the
        # scores behind it only under "details".
        conf = answer["confidence"]
        badge = msg.locator(".badge")
        expect(badge).to_have_attribute("data-level", conf["level"])
        expect(badge).to_contain_text(conf["level"], ignore_case=True)
        reason = msg.locator(".confidence-reason")
        expect(reason).to_have_text(re.compile(r"^[A-Z][^0-9%]+\.$"))
        numbers = msg.locator(".confidence-details .confidence-numbers")
        expect(numbers).to_be_hidden()
        msg.locator(".confidence-details summary").click()
        expect(numbers).to_contain_text(conf["reason"])
        assert not answer["metadata"]["fallback"]

        # One count of sources (the button's); a label shared by several sources is
        # one row listing their numbers; no server path anywhere in the message.
        sources = answer["sources"]
        labels = [s["label"] for s in sources]
        # Whether this question's sources share a label depends on the docs of the
        # day; the grouping itself is checked on fixed sources at the end.
        toggle = msg.locator(".sources-toggle")
        expect(toggle).to_have_text(f"{len(sources)} sources")
        toggle.click()
        rows = msg.locator(".sources-list > li")
        expect(rows).to_have_count(len(set(labels)))
        expect(msg.locator(".sources-list .source-item")).to_have_count(len(sources))
        for label in set(labels):
            numbers_of = [str(s["number"]) for s in sources if s["label"] == label]
            row = rows.filter(has=page.locator(".source-label", has_text=label)).first
            expect(row.locator(".source-num")).to_have_text(numbers_of)
        body_text = str(msg.text_content())
        assert str(REPO) not in body_text and not re.search(r"/docs/\w+\.md", body_text)
        toggle.click()

        # One marker button per citation; the first opens its passage.
        cites = msg.locator(".answer .cite")
        expect(cites).to_have_count(len(answer["citations"]))
        first = answer["citations"][0]
        # ... and is recorded as a citation click for the answer's query id
        with page.expect_response(lambda r: r.url.endswith("/api/feedback/click")) as clicked:
            cites.first.click()
        assert clicked.value.status == 200, clicked.value.text()
        assert clicked.value.request.post_data_json == {
            "query_id": done["query_id"],
            "citation": first["number"],
        }
        panel = page.locator("#passage")
        expect(panel).to_be_visible()
        expect(panel).to_be_focused()
        heading = page.locator("#passage-heading")
        expect(heading.locator(".crumb-title")).to_have_text(first["title"])
        expect(heading.locator(".crumb-section")).to_have_text(first["section"])
        quote = no_markers(str(panel.locator("blockquote").text_content()))
        assert no_markers(first["support_text"]) == quote
        expect(page.locator("#passage-kicker")).to_have_text(f"Source {first['number']}")
        # The panel names the source by title and section, never by the server's
        # path, and links to the document as ragline serves it.
        panel_text = str(panel.text_content())
        assert first["source"] not in panel_text and str(REPO) not in panel_text
        link = panel.locator("a.passage-link")
        expect(link).to_have_text("Open the document")
        href = str(link.get_attribute("href"))
        assert href == f"api/documents/{first['doc_id']}/text", href
        doc = page.request.get(server + href)
        assert doc.status == 200 and doc.headers["content-type"].startswith("text/plain")
        assert no_markers(first["support_text"])[:80] in no_markers(doc.text())
        assert first["source"] not in doc.text()

        # Escape closes it and gives focus back to the marker.
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
        expect(cites.first).to_be_focused()

        # Thumbs up: sent as a rating, shown as pressed, kept in the server's query log.
        up, down = (msg.locator(f'.rate-btn[data-rating="{v}"]') for v in ("up", "down"))
        expect(up).to_have_attribute("aria-pressed", "false")
        with page.expect_response(lambda r: r.url.endswith("/api/feedback")) as rated:
            up.click()
        assert rated.value.status == 200, rated.value.text()
        assert rated.value.request.post_data_json == {"query_id": done["query_id"], "rating": "up"}
        expect(up).to_have_attribute("aria-pressed", "true")
        expect(down).to_have_attribute("aria-pressed", "false")
        with sqlite3.connect(docs_index / "querylog.sqlite3") as conn:
            kept = conn.execute(
                "SELECT kind, rating, citation FROM query_feedback WHERE query_id = ? ORDER BY id",
                (done["query_id"],),
            ).fetchall()
        assert kept == [("click", None, first["number"]), ("rating", "up", None)]

        # The conversation is listed and kept: the follow-up carries its id.
        expect(page.locator("#history li")).to_have_count(1)
        expect(page.locator("#history .history-title")).to_have_text(QUESTION)
        with page.expect_request(lambda r: r.url.endswith("/api/chat")) as req:
            events2 = ask(page, OFF_TOPIC)
        sent = req.value.post_data_json
        assert sent is not None and sent["conversation_id"] == done["conversation_id"]
        done2 = events2[-1][1]
        assert done2["conversation_id"] == done["conversation_id"]
        second = page.locator(".msg-assistant").nth(1)
        if done2["answer"]["metadata"]["fallback"]:
            expect(second).to_have_class(re.compile(r"\bis-fallback\b"))
            expect(second.locator(".fallback-label")).to_be_visible()
        else:
            expect(second).not_to_have_class(re.compile(r"\bis-fallback\b"))
        expect(second.locator(".badge")).to_have_attribute(
            "data-level", done2["answer"]["confidence"]["level"]
        )

        # New chat empties the thread; the stored conversation comes back from the list.
        page.click("#new-chat")
        expect(page.locator("#messages > li")).to_have_count(0)
        expect(page.locator("#question")).to_be_focused()
        page.click("#history .history-open")
        expect(page.locator("#messages > li")).to_have_count(4)
        expect(page.locator("#chat-title")).to_have_text(QUESTION)

    if os.environ.get("RAGLINE_UPDATE_SCREENSHOT") == "1":
        save_screenshot(browser, server)


def save_screenshot(browser: Browser, server: str) -> None:
    """The README's picture: a fresh page, one answer, its first passage open."""
    with open_page(browser, server, viewport={"width": 1280, "height": 800}) as page:
        ask(page, QUESTION)
        page.locator(".msg-assistant .cite").first.click()
        expect(page.locator("#passage")).to_be_visible()
        page.wait_for_timeout(300)  # let the panel's slide-in finish
        page.locator("#question").blur()
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size < 300_000


def test_phone_layout_fits_and_uses_dark_scheme(browser: Browser, server: str) -> None:
    with open_page(
        browser, server, viewport={"width": 375, "height": 740}, color_scheme="dark"
    ) as page:
        no_horizontal_overflow(page)
        # The conversation list is a drawer behind the menu button.
        expect(page.locator("#sidebar")).to_be_hidden()
        page.click("#menu-btn")
        expect(page.locator("#sidebar")).to_be_visible()
        expect(page.locator("#new-chat")).to_be_focused()
        page.keyboard.press("Escape")
        expect(page.locator("#sidebar")).to_be_hidden()
        expect(page.locator("#menu-btn")).to_be_focused()

        events = ask(page, QUESTION)
        assert events[-1][0] == "done"
        no_horizontal_overflow(page)
        page.locator(".msg-assistant .cite").first.click()
        panel = page.locator("#passage")
        expect(panel).to_be_visible()
        box = panel.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 375
        no_horizontal_overflow(page)

        bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        r, g, b = (int(v) for v in re.findall(r"\d+", bg)[:3])
        assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 60, bg


def test_long_question_is_refused_with_a_message(browser: Browser, server: str) -> None:
    """A question past the limit is neither cut nor sent: the box keeps all of it and
    the notice says how long it is and what the limit is."""
    long = "how are deleted files removed from the index " * 30  # 1,350 characters
    with open_page(browser, server) as page:
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.fill("#question", long)
        assert len(page.input_value("#question")) == len(long)  # nothing cut on input
        page.press("#question", "Enter")
        notice = page.locator("#notice")
        expect(notice).to_be_visible()
        expect(notice).to_contain_text("at most 1000 characters")
        expect(notice).to_contain_text(f"this one has {len(long.strip())}")
        expect(page.locator(".msg-assistant")).to_have_count(0)
        assert page.input_value("#question") == long
        assert not any(u.endswith("/api/chat") for u in requests), requests


def test_markdown_emphasis_is_rendered(browser: Browser, server: str) -> None:
    """*italics* and _italics_ become <em>; snake_case, a lone * and list bullets do not."""
    with open_page(browser, server) as page:
        got = page.evaluate(
            """async () => {
              const { renderAnswer } = await import("./static/render.js");
              const root = document.createElement("div");
              renderAnswer(root, "An *index* is _one_ folder, **on disk** [1].\\n"
                + "* a bullet, snake_case_name and 2 * 3 * 4", null);
              return { em: [...root.querySelectorAll("em")].map((e) => e.textContent),
                       text: root.textContent, items: root.querySelectorAll("li").length };
            }"""
        )
    assert got["em"] == ["index", "one"], got
    assert got["text"].startswith("An index is one folder, on disk [1]."), got
    assert "snake_case_name" in got["text"], got
    assert "2 * 3 * 4" in got["text"] and got["items"] == 1, got


def test_event_stream_parser_in_the_browser(browser: Browser, server: str) -> None:
    """sse.js against what networks do to a stream: any chunking, CRLF, comments."""
    with open_page(browser, server) as page:
        got = page.evaluate(
            """async () => {
              const { createSSEParser } = await import("./static/sse.js");
              const text = ": keep-alive\\r\\nevent: token\\r\\n"
                + "data: {\\"text\\": \\"a\\"}\\r\\n\\r\\n"
                + "event: token\\ndata: line1\\ndata: line2\\n\\n"
                + "event: ghost\\n\\n"
                + "data: plain\\r\\rid: 7\\nevent: done\\ndata: {}\\n\\n"
                + "event: cut\\ndata: never dispatched";
              const results = [];
              for (const size of [1, 2, 3, 7, text.length]) {
                const seen = [];
                const p = createSSEParser((e) => seen.push(e));
                for (let i = 0; i < text.length; i += size) p.push(text.slice(i, i + size));
                p.end();
                results.push(seen);
              }
              return results;
            }"""
        )
    expected = [
        {"event": "token", "data": '{"text": "a"}', "id": ""},
        {"event": "token", "data": "line1\nline2", "id": ""},
        {"event": "message", "data": "plain", "id": ""},
        {"event": "done", "data": "{}", "id": "7"},
    ]
    assert all(seen == expected for seen in got), got


def test_api_key_and_rate_limit_errors(
    browser: Browser, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    live = serve(docs_index, api_keys_enabled=True, rate_limit_per_minute=2)
    _key_id, key = KeyStore(live.settings).create(live.settings.tenant, "ui test")
    with open_page(browser, f"{live.url}/") as page:
        # No key: the 401 is shown with a way to set one.
        page.fill("#question", QUESTION)
        page.press("#question", "Enter")
        msg = page.locator(".msg-assistant").last
        expect(msg).to_have_attribute("data-state", "error")
        expect(msg.locator(".msg-error")).to_contain_text("API key")
        msg.locator(".msg-error button").click()
        expect(page.locator("#settings")).to_be_visible()
        expect(page.locator("#api-key")).to_be_focused()
        page.fill("#api-key", key)
        page.press("#api-key", "Enter")
        expect(page.locator("#settings")).to_be_hidden()
        expect(page.locator("#key-state")).to_have_text("set")

        # With the key the question is answered; the header carries it.
        with page.expect_request(lambda r: r.url.endswith("/api/chat")) as req:
            ask(page, QUESTION)
        assert req.value.headers["authorization"] == f"Bearer {key}"
        expect(page.locator(".msg-assistant").last).to_have_attribute("data-state", "done")

        # Past the limit: a 429 whose retry time is shown, and sending is held back.
        for _ in range(3):
            page.fill("#question", QUESTION)
            page.press("#question", "Enter")
            expect(page.locator(".msg-assistant").last).not_to_have_attribute(
                "data-state", "streaming"
            )
            if page.locator(".msg-assistant").last.get_attribute("data-state") == "error":
                break
        last = page.locator(".msg-assistant").last
        expect(last).to_have_attribute("data-state", "error")
        expect(last.locator(".msg-error")).to_contain_text(re.compile(r"Try again in \d+ s"))
        expect(last.locator(".msg-error")).to_contain_text("RAGLINE_RATE_LIMIT_PER_MINUTE")
        expect(page.locator("#notice")).to_contain_text(re.compile(r"ask again in \d+ s"))
        expect(page.locator("#send")).to_be_disabled()


def test_stop_button_aborts_the_stream(
    browser: Browser, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    llm = SlowLLM()
    try:
        live = serve(
            docs_index,
            generator="openai",
            llm_base_url=llm.url,
            llm_model="slow",
            llm_max_retries=0,
            rate_limit_per_minute=0,
        )
        with open_page(browser, f"{live.url}/") as page:
            page.fill("#question", QUESTION)
            page.press("#question", "Enter")
            msg = page.locator(".msg-assistant").last
            expect(msg.locator(".answer .cite")).to_have_count(1)  # tokens are arriving
            expect(msg).to_have_attribute("data-state", "streaming")
            expect(page.locator("#send")).to_be_hidden()
            page.click("#stop")
            expect(msg).to_have_attribute("data-state", "stopped")
            expect(msg.locator(".msg-note")).to_contain_text("Stopped")
            expect(msg.locator(".answer")).to_contain_text("Deleted files lose their chunks")
            expect(page.locator("#stop")).to_be_hidden()
            expect(page.locator("#send")).to_be_visible()
            expect(page.locator("#question")).to_be_focused()
            # The abort reaches the model: ragline closes its upstream stream.
            assert llm.disconnected.wait(timeout=30)
            assert llm.requests == 1
    finally:
        llm.close()


def test_sources_sharing_a_label_are_one_row(browser: Browser, server: str) -> None:
    """The page's grouping on fixed sources: one row per label, in order of first
    number, listing every number (two passages of one section are one row)."""
    with open_page(browser, server) as page:
        got = page.evaluate(
            """async () => {
              const { groupSources } = await import("./static/app.js");
              const sources = [
                { number: 1, label: "Ingestion › Deleted files" },
                { number: 2, title: "HTTP API", section: "Documents" },
                { number: 3, label: "Ingestion › Deleted files" },
                { number: 4 },
              ];
              return groupSources(sources).map((g) => [g.label, g.items.map((s) => s.number)]);
            }"""
        )
    assert got == [
        ["Ingestion › Deleted files", [1, 3]],
        ["HTTP API › Documents", [2]],
        ["Source 4", [4]],
    ]
