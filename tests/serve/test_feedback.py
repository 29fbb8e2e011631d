"""POST /api/feedback (ratings and citation clicks) kept with the query log, scoped to
the tenant, and `ragline stats` reading the helpful and click rates per day: a real
server, a real SQLite log, the real CLI."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.serve.feedback import FeedbackRow, summarize_feedback

from .conftest import LiveServer

QUESTIONS = [
    "How do I filter search results by chapter?",
    "What is reciprocal rank fusion?",
]


def ask(c: httpx.Client, question: str) -> dict[str, Any]:
    r = c.post("/api/query", json={"question": question})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def refused(
    c: httpx.Client,
    body: dict[str, Any],
    field: str,
    path: str = "/api/feedback",
    status: int = 400,
) -> str:
    r = c.post(path, json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field, r.json()
    message: str = r.json()["message"]
    assert message.startswith(field)
    return message


def stored(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT query_id, tenant, kind, rating, comment, citation FROM query_feedback "
            "ORDER BY id"
        ).fetchall()


def test_ratings_and_clicks_are_kept_and_counted_by_stats(
    tmp_path: Path,
    docs_index: Path,
    serve: Callable[..., LiveServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "querylog.sqlite3"
    live = serve(
        docs_index,
        rate_limit_per_minute=0,
        query_log_url=str(db),
        query_log_salt="s",
        query_log_privacy=False,  # the comment is kept only with full logging
    )
    with live.client() as c:
        first, second = (ask(c, q) for q in QUESTIONS)
        one, two = first["metadata"]["query_id"], second["metadata"]["query_id"]
        ok = c.post("/api/feedback", json={"query_id": one, "rating": "up", "comment": " Clear  "})
        assert ok.status_code == 200, ok.text
        assert ok.json() == {"query_id": one, "kind": "rating", "recorded": True}
        for rating in ("down", "up"):  # a change of mind: the latest rating counts
            assert c.post("/api/feedback", json={"query_id": two, "rating": rating}).is_success
        clicked = c.post("/api/feedback/click", json={"query_id": one, "citation": 1})
        assert clicked.json() == {"query_id": one, "kind": "click", "recorded": True}

        # bad input: a 400 naming the field, nothing stored
        before = stored(db)
        click = "/api/feedback/click"
        refused(c, {"query_id": "not-an-id", "rating": "up"}, "query_id")
        refused(c, {"query_id": one.upper(), "citation": 1}, "query_id", click)
        unknown = {"query_id": "0" * 32, "rating": "up"}
        assert "no answer with this id" in refused(c, unknown, "query_id", status=404)
        refused(c, {"query_id": "0" * 32, "citation": 1}, "query_id", click, 404)
        refused(c, {"query_id": one, "rating": "meh"}, "rating")
        refused(c, {"query_id": one}, "rating")
        refused(c, {"query_id": one, "rating": 1}, "rating")
        refused(c, {"query_id": one}, "citation", click)
        refused(c, {"query_id": one, "citation": 0}, "citation", click)
        refused(c, {"query_id": one, "citation": 1, "rating": "up"}, "rating", click)
        refused(c, {"query_id": one, "rating": "up", "comment": "x" * 2001}, "comment")
        refused(c, {"query_id": one, "rating": "up", "kind": "like"}, "kind")
        assert stored(db) == before
    assert stored(db) == [
        (one, "default", "rating", "up", "Clear", None),
        (two, "default", "rating", "down", None, None),
        (two, "default", "rating", "up", None, None),
        (one, "default", "click", None, None, 1),
    ]

    # another tenant cannot rate (or see) this tenant's answers
    other = serve(docs_index, rate_limit_per_minute=0, query_log_url=str(db), tenant="acme")
    with other.client() as c:
        r = c.post("/api/feedback", json={"query_id": one, "rating": "down"})
        assert r.status_code == 404 and r.json()["field"] == "query_id"

    monkeypatch.setenv("RAGLINE_QUERY_LOG_URL", str(db))
    result = CliRunner().invoke(app, ["stats", "--index", str(docs_index), "--json"])
    assert result.exit_code == 0, result.output
    feedback = json.loads(result.stdout)["feedback"]
    cited = sum(1 for a in (first, second) if a["citations"])
    assert first["citations"], "the clicked answer has citations"
    assert (feedback["answers"], feedback["rated"], feedback["helpful_rate"]) == (2, 2, 1.0)
    assert feedback["with_citations"] == cited
    assert feedback["citation_click_rate"] == round(1 / cited, 4)
    [day] = feedback["by_day"]
    with sqlite3.connect(db) as conn:
        (asked_at,) = conn.execute(
            "SELECT created_at FROM query_log WHERE query_id = ?", (one,)
        ).fetchone()
    assert day["day"] == asked_at[:10]
    acme = CliRunner().invoke(
        app, ["stats", "--index", str(docs_index), "--tenant", "acme", "--json"]
    )
    assert json.loads(acme.stdout)["feedback"]["rated"] == 0
    table = CliRunner().invoke(app, ["stats", "--index", str(docs_index)], env={"COLUMNS": "160"})
    assert table.exit_code == 0 and "feedback per day" in table.stdout
    assert "100.0%" in table.stdout and day["day"] in table.stdout


def test_privacy_mode_keeps_the_rating_but_not_the_comment(
    tmp_path: Path, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    db = tmp_path / "querylog.sqlite3"
    live = serve(docs_index, rate_limit_per_minute=0, query_log_url=str(db), query_log_privacy=True)
    with live.client() as c:
        query_id = ask(c, QUESTIONS[0])["metadata"]["query_id"]
        body = {"query_id": query_id, "rating": "down", "comment": "my card number is 4111"}
        assert c.post("/api/feedback", json=body).json()["recorded"] is True
    assert stored(db) == [(query_id, "default", "rating", "down", None, None)]


def test_with_the_query_log_off_feedback_is_not_recorded(
    docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    live = serve(docs_index, rate_limit_per_minute=0, query_log_enabled=False)
    with live.client() as c:
        query_id = ask(c, QUESTIONS[0])["metadata"]["query_id"]
        r = c.post("/api/feedback", json={"query_id": query_id, "rating": "up"})
        assert r.json() == {"query_id": query_id, "kind": "rating", "recorded": False}
        assert c.post("/api/feedback", json={"query_id": "x", "rating": "up"}).status_code == 400


def test_rates_per_day_count_the_latest_rating_and_answers_with_citations() -> None:
    def row(query_id: str, at: str, **kw: Any) -> FeedbackRow:
        kind = "click" if "citation" in kw else "rating"
        return FeedbackRow(query_id, "t", at, kind, "ip", **kw)

    queries = [
        ("a", "2026-11-01T09:00:00+00:00", 2),
        ("b", "2026-11-01T10:00:00+00:00", 0),  # no citation to click
        ("c", "2026-11-02T08:00:00+00:00", 1),
        ("d", "2026-11-02T09:00:00+00:00", 3),
    ]
    feedback = [
        row("a", "2026-11-01T09:01:00+00:00", rating="up"),
        row("a", "2026-11-01T09:02:00+00:00", citation=1),
        row("a", "2026-11-01T09:03:00+00:00", citation=2),  # one answer, two clicks
        row("b", "2026-11-01T10:05:00+00:00", rating="up"),
        row("b", "2026-11-01T10:06:00+00:00", rating="down"),  # the latest counts
        row("c", "2026-11-02T08:01:00+00:00", rating="down"),
        row("zz", "2026-11-02T08:01:00+00:00", rating="up"),  # not among the queries
    ]
    days = summarize_feedback(queries, feedback)
    assert [(d["day"], d["answers"], d["rated"], d["helpful_rate"]) for d in days] == [
        ("2026-11-01", 2, 2, 0.5),
        ("2026-11-02", 2, 1, 0.0),
    ]
    assert [(d["with_citations"], d["clicked"], d["citation_click_rate"]) for d in days] == [
        (1, 1, 1.0),
        (2, 0, 0.0),
    ]
    assert summarize_feedback(queries[1:2], []) == [
        {
            "day": "2026-11-01",
            "answers": 1,
            "rated": 0,
            "helpful": 0,
            "helpful_rate": None,
            "with_citations": 0,
            "clicked": 0,
            "citation_click_rate": None,
        }
    ]
