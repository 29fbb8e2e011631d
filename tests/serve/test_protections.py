"""Rate limit, tenant isolation with API keys, and a failing query log, on real servers."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from openai import OpenAI

from ragline.serve.auth import KeyStore
from ragline.serve.querylog import make_query_log
from ragline.settings import Settings

from .conftest import LiveServer, metric_value, sse_events


def test_eleventh_query_in_a_minute_gets_one_429(
    docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    live = serve(docs_index, rate_limit_per_minute=10)
    statuses, retry = [], []
    with live.client() as c:
        for _ in range(11):
            r = c.post("/api/query", json={"question": "What is reciprocal rank fusion?"})
            statuses.append(r.status_code)
            retry.append(r.headers.get("retry-after"))
            message = r.json().get("message", "")
        assert c.get("/healthz").status_code == 200  # GETs outside the API are not limited
        text = c.get("/metrics").text
    assert statuses.count(429) == 1 and statuses[-1] == 429
    assert statuses[:10] == [200] * 10
    assert retry[-1] is not None and 1 <= int(retry[-1]) <= 60
    assert "RAGLINE_RATE_LIMIT_PER_MINUTE" in message  # the refusal says how to raise it
    assert metric_value(text, "ragline_rate_limited_total") == 1


def _upload(c, name: str, text: str) -> str:  # type: ignore[no-untyped-def]
    r = c.post("/api/documents", files={"file": (name, text.encode())})
    assert r.status_code == 200, r.text
    return str(r.json()["document"]["doc_id"])


def test_two_tenants_cannot_see_each_other(
    tmp_path: Path, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    index = tmp_path / "index"
    shutil.copytree(docs_index, index)
    settings = Settings(index_dir=index)
    keys = KeyStore(settings)
    _, key_a = keys.create("acme")
    _, key_b = keys.create("globex")
    keys.close()
    live = serve(
        index, api_keys_enabled=True, rate_limit_per_minute=0, query_log_salt="s",
        query_log_privacy=False,  # the rows' questions are checked below
    )  # fmt: skip

    with live.client() as anon:
        assert anon.post("/api/search", json={"query": "anything"}).status_code == 401
        r = anon.get("/api/documents", headers={"Authorization": "Bearer rl_nope"})
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        assert anon.get("/healthz").status_code == 200

    a = live.client(headers={"Authorization": f"Bearer {key_a}"})
    b = live.client(headers={"X-API-Key": key_b})
    secret_a = "# Acme vault\n\nThe acme vault combination is stored in the zanzibar ledger.\n"
    secret_b = "# Globex plan\n\nThe globex plan moves the quasar foundry to Cypress Creek.\n"
    doc_a = _upload(a, "vault.md", secret_a)
    doc_b = _upload(b, "plan.md", secret_b)
    pairs = [(a, b, doc_a, doc_b, "quasar foundry globex plan"),
             (b, a, doc_b, doc_a, "zanzibar ledger acme vault")]  # fmt: skip
    for me, other, mine, theirs, their_words in pairs:
        listed = {d["doc_id"] for d in me.get("/api/documents").json()["documents"]}
        assert listed == {mine}  # not the other tenant's, not the default tenant's docs
        assert me.get(f"/api/documents/{theirs}").status_code == 404
        assert me.delete(f"/api/documents/{theirs}").status_code == 404
        hits = me.post(
            "/api/search", json={"query": their_words, "filters": {"doc_id": theirs}}
        ).json()["hits"]
        assert hits == []
        hits = me.post("/api/search", json={"query": their_words}).json()["hits"]
        assert all(h["doc_id"] == mine for h in hits)
        ans = me.post("/api/query", json={"question": f"What is the {their_words}?"}).json()
        assert all(s["chunk_id"] not in theirs for s in ans["sources"])
        assert theirs not in str(ans) and their_words.split()[0] not in ans["answer"]
        with me.stream("POST", "/api/chat", json={"question": f"Tell me about {their_words}"}) as r:
            events = sse_events("".join(r.iter_text()))
        assert their_words.split()[0] not in str(events[-1][1]["answer"]["answer"])
        conv = events[-1][1]["conversation_id"]
        assert other.get(f"/api/conversations/{conv}").status_code == 404
        assert conv not in str(other.get("/api/conversations").json())
        r = other.post("/api/chat", json={"question": "continue please", "conversation_id": conv})
        assert r.status_code == 404
        assert other.delete(f"/api/conversations/{conv}").status_code == 404
        token = key_a if me is a else key_b
        oai = OpenAI(base_url=f"{live.url}/v1", api_key=token, max_retries=0)
        done = oai.chat.completions.create(
            model="ragline", messages=[{"role": "user", "content": f"What is {their_words}?"}]
        )
        assert theirs not in str(done.model_extra)
    # each side can still delete its own document
    assert a.delete(f"/api/documents/{doc_a}").status_code == 200
    assert b.get(f"/api/documents/{doc_b}").status_code == 200
    a.close()
    b.close()

    log = make_query_log(live.settings)
    try:
        rows_a, rows_b = log.rows("acme", limit=1000), log.rows("globex", limit=1000)
    finally:
        log.close()
    assert rows_a and rows_b
    assert {r.tenant for r in rows_a} == {"acme"} and {r.tenant for r in rows_b} == {"globex"}
    assert not {r.query_id for r in rows_a} & {r.query_id for r in rows_b}
    assert any("quasar" in (r.question or "") for r in rows_a)  # a asked about b's words
    assert all("quasar" not in (r.question or "") for r in rows_b)
    assert all("zanzibar" not in (r.question or "") for r in rows_a)


def test_query_log_failure_never_fails_a_query(
    tmp_path: Path, docs_index: Path, serve: Callable[..., LiveServer],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    db = tmp_path / "log" / "querylog.sqlite3"
    db.parent.mkdir()
    live = serve(docs_index, rate_limit_per_minute=0, query_log_url=str(db), query_log_salt="s")
    with live.client() as c:
        assert c.post("/api/query", json={"question": "What is a chunk?"}).status_code == 200
        assert db.is_file()
        # kill the database file and put a directory where it was: no process (root
        # included) can open a directory as a SQLite database
        for p in db.parent.iterdir():
            p.unlink()
        db.mkdir()
        with caplog.at_level(logging.WARNING):
            r1 = c.post("/api/query", json={"question": "What is a chunk?"})
            r2 = c.post("/api/search", json={"query": "chunk size"})
            with c.stream("POST", "/api/chat", json={"question": "What is a chunk?"}) as r:
                events = sse_events("".join(r.iter_text()))
        text = c.get("/metrics").text
    assert r1.status_code == 200 and r1.json()["answer"]
    assert r2.status_code == 200 and r2.json()["hits"]
    assert events[-1][0] == "done"
    assert metric_value(text, "ragline_query_log_failures_total") >= 3
    assert any(rec.levelno == logging.WARNING and "log" in rec.getMessage().lower()
               for rec in caplog.records)  # fmt: skip


def test_cors_preflight_for_an_allowed_origin_needs_no_key(
    docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    origin = "https://chat.example.com"
    live = serve(docs_index, api_keys_enabled=True, cors_allow_origins=(origin,))
    preflight = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    with live.client() as c:
        ok = c.options("/v1/chat/completions", headers=preflight)
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == origin
        other = c.options("/v1/chat/completions", headers={**preflight, "Origin": "https://evil"})
        assert "access-control-allow-origin" not in other.headers
        # The real request still needs a key, and its 401 carries the CORS header.
        r = c.post("/api/search", json={"query": "chunks"}, headers={"Origin": origin})
        assert r.status_code == 401
        assert r.headers["access-control-allow-origin"] == origin
