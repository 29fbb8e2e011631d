"""One query-log row per request to a question endpoint, over a real server: 200, 400,
413, 429 and 500 each leave a row with seed 004's status, and answered rows carry the
session, the answer's length, its citations and the tokens the API reported."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline.serve.querylog import QueryLogRow, SqliteQueryLog

from .conftest import LiveServer

QUESTION = "What does the section chunker do with tables?"


def rows_of(db: Path, expected: int) -> list[QueryLogRow]:
    """The log's rows once ``expected`` are there (a refused request's row is written
    just after its response went out), or what is there after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        log = SqliteQueryLog(db)
        try:
            rows = log.rows("default", limit=1000)
        finally:
            log.close()
        if len(rows) >= expected or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def by_status(rows: list[QueryLogRow], code: int) -> list[QueryLogRow]:
    return [r for r in rows if r.status_code == code]


def test_every_outcome_leaves_a_row(
    tmp_path: Path,
    docs_index: Path,
    serve: Callable[..., LiveServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "querylog.sqlite3"
    live = serve(
        docs_index, rate_limit_per_minute=4, max_request_bytes=2048,
        query_log_url=str(db), query_log_salt="s", query_log_privacy=False,  # full logging
    )  # fmt: skip
    with live.client() as c:
        ok = c.post("/api/query", json={"question": QUESTION, "session_id": "s-200"})
        bad = c.post("/api/query", json={"question": "a", "session_id": "s-400"})

        def broken(*_a: Any, **_k: Any) -> Any:
            raise RuntimeError("injected fault")

        with monkeypatch.context() as m:
            m.setattr(live.rag, "search", broken)
            crash = c.post("/api/search", json={"query": "chunk size"})
        big = c.post("/api/query", content=b'{"question": "' + b"a" * 4000 + b'"}',
                     headers={"content-type": "application/json"})  # fmt: skip
        c.post("/api/query", json={"message": QUESTION})
        limited = c.post("/api/query", json={"question": QUESTION})
    assert [ok.status_code, bad.status_code, crash.status_code] == [200, 400, 500]
    assert [big.status_code, limited.status_code] == [413, 429]

    rows = rows_of(db, 6)
    assert len(rows) == 6  # one per request
    answered = next(r for r in rows if r.session_id == "s-200")
    body = ok.json()
    assert answered.status == "success" and answered.status_code == 200
    assert answered.answer == body["answer"] and answered.answer_chars == len(body["answer"])
    assert answered.cited_chunk_ids == list(dict.fromkeys(c["chunk_id"] for c in body["citations"]))
    assert answered.total_tokens == body["metadata"]["total_tokens"] > 0
    assert answered.response_time_ms > 0

    refused = next(r for r in rows if r.session_id == "s-400")
    assert refused.status == "error" and refused.status_code == 400
    assert refused.error and "question" in refused.error and refused.question == "a"
    (failed,) = by_status(rows, 500)
    assert failed.status == "error" and failed.endpoint == "/api/search"
    assert "injected fault" in (failed.error or "")
    (too_big,) = by_status(rows, 413)
    assert too_big.status == "error" and too_big.endpoint == "/api/query"
    (limited_row,) = by_status(rows, 429)
    assert limited_row.status == "rate_limited"


def test_privacy_mode_is_the_default_and_keeps_only_hashes(
    tmp_path: Path, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    """No setting given: neither a question nor an answer is stored as text."""
    db = tmp_path / "querylog.sqlite3"
    live = serve(docs_index, rate_limit_per_minute=0, query_log_url=str(db), query_log_salt="s")
    with live.client() as c:
        assert c.post("/api/query", json={"question": QUESTION}).status_code == 200
        assert c.post("/api/query", json={"question": "a"}).status_code == 400
    rows = rows_of(db, 2)
    assert len(rows) == 2
    for row in rows:
        assert row.question is None and row.answer is None and len(row.question_hash) == 64
    assert any(r.answer_hash and r.answer_chars > 0 for r in rows)


def test_a_search_row_is_written_with_its_hits_and_timings(
    tmp_path: Path, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    """A successful search writes its row in the same worker-thread hop as the search:
    exactly one row, its hits and stage timings those of the response."""
    db = tmp_path / "querylog.sqlite3"
    live = serve(docs_index, rate_limit_per_minute=0, query_log_url=str(db), query_log_salt="s")
    with live.client() as c:
        r = c.post("/api/search", json={"query": "chunk size", "max_results": 3})
    assert r.status_code == 200
    body = r.json()
    (row,) = rows_of(db, 1)
    assert row.status == "success" and row.status_code == 200
    assert row.endpoint == "/api/search" and row.query_id == body["query_id"]
    assert row.retrieved_chunk_ids == [h["id"] for h in body["hits"]] != []
    assert row.latencies_ms == pytest.approx(body["timings_ms"], abs=1e-3)  # shown rounded
    assert row.response_time_ms is not None and row.response_time_ms > 0
    time.sleep(0.5)  # a second row (the middleware's) would land after the response
    assert len(rows_of(db, 1)) == 1
