"""The query log in a real PostgreSQL (QUERY_LOG_URL=postgresql://…)."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from ragline.serve.feedback import FeedbackRow
from ragline.serve.querylog import (
    SCHEMA_VERSION,
    PostgresQueryLog,
    QueryLogRow,
    make_query_log,
)
from ragline.settings import Settings


def full_row(query_id: str = "q1", tenant: str = "acme", created_at: str = "") -> QueryLogRow:
    """A row whose every field differs from its default (as in test_querylog.py)."""
    return QueryLogRow(
        query_id=query_id,
        created_at=created_at or "2025-01-02T03:04:05.123456+00:00",
        tenant=tenant,
        endpoint="/v1/chat/completions",
        ip_hash="ab" * 32,
        question_hash="cd" * 32,
        question="Qu'est-ce que le dropout ? «ünïcode»",
        retrieved_chunk_ids=["c1", "c2"],
        confidence_level="high",
        confidence_score=0.75,
        fallback=True,
        latencies_ms={"retrieve": 1.5, "generate": 20.25},
        status_code=500,
        error="boom",
        citations=3,
        citations_removed=1,
        generator="local",
        model="smollm2",
        total_tokens=99,
        citations_unsupported=2,
        status="error",
        session_id="s-1",
        conversation_id="conv2",
        answer="Le dropout [1].",
        answer_hash="ef" * 32,
        answer_chars=15,
        cited_chunk_ids=["c1"],
        response_time_ms=12.25,
    )


@pytest.fixture
def db_url(pg_server: Any, pg_url: str) -> Iterator[str]:
    """A fresh database per test, dropped afterwards."""
    name = f"qlog_{secrets.token_hex(4)}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield str(pg_server.url(name))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_every_field_round_trips_and_rows_are_tenant_scoped(db_url: str) -> None:
    log = make_query_log(Settings(query_log_url=db_url, query_log_privacy=False))
    assert isinstance(log, PostgresQueryLog)
    try:
        rows = [full_row(f"q{i}", "a" if i % 2 else "b", f"2025-01-0{i + 1}T00:00:00.000001+00:00")
                for i in range(4)]  # fmt: skip
        assert all(log.write(r) for r in rows)
        assert log.rows("a") == [rows[3], rows[1]]
        assert log.rows("b", limit=1) == [rows[2]]
        assert log.rows("c") == []
    finally:
        log.close()
    with psycopg.connect(db_url) as conn:
        got = conn.execute(
            "SELECT value FROM ragline_query_log_meta WHERE key = 'schema_version'"
        ).fetchone()
        assert got == (str(SCHEMA_VERSION),)


def test_privacy_mode_drops_the_question(db_url: str) -> None:
    log = make_query_log(Settings(query_log_url=db_url, query_log_privacy=True))
    try:
        assert log.write(full_row())
        (row,) = log.rows("acme")
        assert row.question is None and row.question_hash == full_row().question_hash
    finally:
        log.close()


def test_unreachable_server_and_dropped_connection_only_return_false(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = PostgresQueryLog(f"postgresql://postgres@127.0.0.1:{port}/x", timeout_s=1)
    assert "cannot be reached" in caplog.text
    assert down.write(full_row()) is False
    down.close()

    log = PostgresQueryLog(db_url)
    try:
        assert log.write(full_row("before"))
        with psycopg.connect(db_url, autocommit=True) as admin:  # the server drops us
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        assert log.write(full_row("lost")) is False
        assert log.write(full_row("after")) is True  # reconnected
        assert {r.query_id for r in log.rows("acme")} == {"before", "after"}
    finally:
        log.close()


def test_feedback_is_kept_beside_the_rows_and_tenant_scoped(db_url: str) -> None:
    """The same table as SQLite's (tests/serve/test_feedback.py), in PostgreSQL."""
    log = make_query_log(Settings(query_log_url=db_url, query_log_privacy=True))
    try:
        assert log.write(full_row("q1", "acme"))
        assert log.has_query("acme", "q1")
        assert not log.has_query("other", "q1") and not log.has_query("acme", "q2")
        at = "2025-01-02T03:05:00.000001+00:00"
        rating = FeedbackRow("q1", "acme", at, "rating", "ab" * 32, "down", "secret words")
        click = FeedbackRow("q1", "acme", at.replace("05:00", "06:00"), "click", "ab", citation=2)
        log.add_feedback(rating)
        log.add_feedback(click)
        # privacy mode: the comment is not stored
        assert log.feedback("acme") == [replace(rating, comment=None), click]
        assert log.feedback("acme", since=click.created_at) == [click]
        assert log.feedback("other") == []
    finally:
        log.close()
