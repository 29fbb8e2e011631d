"""Every /api endpoint of a real server over HTTP: answers, SSE chat with history,
search, documents, conversations, health, metrics, and the error shape."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import httpx

from .conftest import LiveServer, metric_value, sse_events

ERROR_KEYS = {"error", "message", "status_code"}


def assert_error(r: httpx.Response, status: int, field: str | None = None) -> dict[str, object]:
    assert r.status_code == status, r.text
    body: dict[str, object] = r.json()
    assert set(body) >= ERROR_KEYS
    assert body["status_code"] == status
    assert "Traceback" not in r.text
    if field is not None:
        assert body.get("field") == field
        assert field in str(body["message"])
    return body


def test_query_answers_with_citations_and_metadata(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        r = c.post(
            "/api/query",
            json={"question": "  How do I <b>filter</b> search   results by chapter? ",
                  "max_results": 5},
        )  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) >= {"answer", "sources", "citations", "confidence", "metadata"}
    assert re.search(r"\[\d+\]", body["answer"])
    assert body["citations"] and body["sources"]
    numbers = {s["number"] for s in body["sources"]}
    assert {c["number"] for c in body["citations"]} <= numbers
    meta = body["metadata"]
    assert meta["question"] == "How do I filter search results by chapter?"  # cleaned
    assert re.fullmatch(r"[0-9a-f]{32}", meta["query_id"])
    assert meta["generator"] == "extractive" and meta["fallback"] is False
    assert meta["total_tokens"] > 0 and meta["timings_ms"]["total"] > 0
    assert meta["search_query"] == meta["question"] and meta["query_rewrite"] == "none"
    assert meta["search_phrasings"] == [] and meta["query_expansion"] == "none"
    assert body["confidence"]["level"] in {"high", "medium"}


def test_chat_streams_events_and_keeps_history(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        with c.stream(
            "POST", "/api/chat", json={"question": "What does the section chunker do with tables?"}
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            raw = "".join(r.iter_text())
        events = sse_events(raw)
        kinds = [k for k, _ in events]
        assert kinds[-1] == "done" and "token" in kinds and "citation" in kinds
        assert kinds.count("done") == 1 and "error" not in kinds
        tokens = "".join(d["text"] for k, d in events if k == "token")
        done = events[-1][1]
        assert done["answer"]["answer"] == tokens.strip()
        assert set(done) >= {"conversation_id", "message_id", "query_id", "answer",
                             "total_tokens", "latency_ms"}  # fmt: skip
        assert done["total_tokens"] > 0 and done["latency_ms"] > 0
        citation = next(d for k, d in events if k == "citation")
        assert citation["source"]["number"] == citation["number"]
        assert citation["source"]["chunk_id"] and citation["support_text"]
        conv = done["conversation_id"]

        with c.stream(
            "POST", "/api/chat",
            json={"question": "And what about code blocks?", "conversation_id": conv},
        ) as r:  # fmt: skip
            second = sse_events("".join(r.iter_text()))
        assert second[-1][0] == "done" and second[-1][1]["conversation_id"] == conv

        detail = c.get(f"/api/conversations/{conv}").json()
        roles = [m["role"] for m in detail["history"]]
        assert roles == ["user", "assistant", "user", "assistant"]
        assert detail["history"][1]["answer"]["citations"]
        listed = c.get("/api/conversations").json()["conversations"]
        assert conv in {x["conversation_id"] for x in listed}
        assert c.delete(f"/api/conversations/{conv}").status_code == 200
        assert_error(c.get(f"/api/conversations/{conv}"), 404)
        r = c.post("/api/chat", json={"question": "anything here?", "conversation_id": conv})
        assert_error(r, 404, "conversation_id")


def test_search_returns_ranked_chunks_of_the_tenant(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        r = c.post(
            "/api/search",
            json={"query": "reciprocal rank fusion", "max_results": 3, "mode": "hybrid",
                  "filters": {"tenant": "someone-else"}},
        )  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["hits"]) == 3
    assert [h["rank"] for h in body["hits"]] == [1, 2, 3]
    assert all(h["tenant"] == "default" for h in body["hits"])  # the user filter is overridden
    assert body["query_id"]


def test_operator_filters_reach_front_matter(docs_server: LiveServer) -> None:
    """A date range and an $or on front-matter keys, through the HTTP body."""
    text = (
        "---\nrelease: 2024-03-01\nversion: 3\n---\n# Platypus ferry\n\n"
        "The platypus ferry leaves the harbour at dawn.\n"
    )
    with docs_server.client() as c:
        up = c.post("/api/documents", files={"file": ("ferry.md", text.encode(), "text/markdown")})
        assert up.status_code == 200, up.text
        doc_id = up.json()["document"]["doc_id"]
        try:
            query = {"query": "platypus ferry harbour dawn", "max_results": 10}
            within = {
                "release": {"$gte": "2024-01-01", "$lt": "2024-06-01"},
                "$or": [{"version": {"$gt": 5}}, {"version": 3}],
            }
            r = c.post("/api/search", json={**query, "filters": within})
            assert r.status_code == 200, r.text
            hits = r.json()["hits"]
            assert hits and {h["doc_id"] for h in hits} == {doc_id}
            before = {"release": {"$lt": "2024-03-01"}}
            r = c.post("/api/search", json={**query, "filters": before})
            assert r.status_code == 200 and r.json()["hits"] == []
            r = c.post("/api/search", json={**query, "filters": {"$not": before}})
            assert doc_id in {h["doc_id"] for h in r.json()["hits"]}
        finally:
            assert c.delete(f"/api/documents/{doc_id}").status_code == 200


def test_upload_list_read_delete_keeps_other_documents(docs_server: LiveServer) -> None:
    text = "# Zebra parking\n\nThe zebra parking rule says quokkas park on odd days only.\n"
    with docs_server.client() as c:
        before = c.get("/api/documents").json()
        r = c.post(
            "/api/documents",
            files={"file": ("../../etc/evil name.md", text.encode(), "text/markdown")},
        )
        assert r.status_code == 200, r.text
        up = r.json()
        assert up["status"] == "indexed" and up["chunks"] >= 1
        doc = up["document"]
        assert doc["filename"] == "evil name.md" and doc["uploaded"] is True
        doc_id = doc["doc_id"]
        after = c.get("/api/documents").json()
        assert after["total"] == before["total"] + 1  # nothing else was removed
        assert {d["doc_id"] for d in before["documents"]} < {
            d["doc_id"] for d in after["documents"]
        }
        assert c.get(f"/api/documents/{doc_id}").json()["title"] == "Zebra parking"
        shown = c.get(f"/api/documents/{doc_id}/text")  # the web UI's source link
        assert shown.status_code == 200 and "Zebra parking" in shown.text
        assert shown.headers["content-type"].startswith("text/plain")
        again = c.post("/api/documents", files={"file": ("copy.md", text.encode())}).json()
        assert again["status"] == "unchanged"
        hits = c.post("/api/search", json={"query": "quokkas park on odd days"}).json()["hits"]
        assert hits[0]["doc_id"] == doc_id
        # the stored file's name comes from the content, never from the client
        stored = list((docs_server.settings.index_dir / "uploads" / "default").iterdir())
        assert any(re.fullmatch(r"[0-9a-f]{32}\.md", p.name) for p in stored)
        assert not any("evil" in p.name for p in stored)

        assert c.delete(f"/api/documents/{doc_id}").json() == {"doc_id": doc_id, "deleted": True}
        assert c.get("/api/documents").json()["total"] == before["total"]
        assert_error(c.get(f"/api/documents/{doc_id}"), 404)
        assert_error(c.get(f"/api/documents/{doc_id}/text"), 404)
        assert_error(c.delete(f"/api/documents/{doc_id}"), 404)


def test_upload_without_a_title_is_titled_by_its_client_name(docs_server: LiveServer) -> None:
    text = "Wombat burrows face north so the morning sun dries the tunnel floor.\n\nMore.\n"
    with docs_server.client() as c:
        up = c.post("/api/documents", files={"file": ("Wombat field notes.md", text.encode())})
        assert up.status_code == 200, up.text
        doc = up.json()["document"]
        assert doc["title"] == "Wombat field notes"  # not the content hash it is stored under
        hits = c.post("/api/search", json={"query": "wombat burrows morning sun"}).json()["hits"]
        assert hits[0]["doc_id"] == doc["doc_id"] and hits[0]["title"] == "Wombat field notes"
        assert c.delete(f"/api/documents/{doc['doc_id']}").status_code == 200


def test_an_office_upload_is_indexed_with_its_sections(
    docs_server: LiveServer, tmp_path: Path
) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Lighthouse keeping", 0)
    d.add_heading("Lamp care", 1)
    d.add_paragraph("The keeper trims the lamp wick every evening at sunset before lighting it.")
    path = tmp_path / "keeper.docx"
    d.save(str(path))
    with docs_server.client() as c:
        up = c.post("/api/documents", files={"file": ("Keeper manual.docx", path.read_bytes())})
        assert up.status_code == 200, up.text
        assert up.json()["status"] == "indexed" and up.json()["chunks"] >= 1
        hits = c.post("/api/search", json={"query": "keeper trims the lamp wick"}).json()["hits"]
        assert hits[0]["doc_id"] == up.json()["document"]["doc_id"]
        assert hits[0]["section"] == "Lamp care"
        fake = c.post("/api/documents", files={"file": ("fake.docx", b"plain words")})
        assert_error(fake, 400, "file")
        broken = c.post("/api/documents", files={"file": ("broken.docx", b"PK\x03\x04junk")})
        assert_error(broken, 400, "file")
        assert c.delete(f"/api/documents/{up.json()['document']['doc_id']}").status_code == 200


def test_upload_checks_type_and_size(docs_server: LiveServer) -> None:
    limit = docs_server.settings.max_upload_bytes
    with docs_server.client() as c:
        r = c.post("/api/documents", files={"file": ("tool.exe", b"MZ\x90\x00")})
        assert_error(r, 400, "file")
        r = c.post("/api/documents", files={"file": ("fake.pdf", b"just text")})
        assert_error(r, 400, "file")
        r = c.post("/api/documents", files={"file": ("bin.txt", b"ab\x00cd")})
        assert_error(r, 400, "file")
        r = c.post("/api/documents", files={"file": ("big.md", b"a" * (limit + 1))})
        assert_error(r, 413)


def test_upload_type_the_ingest_skips_is_refused(
    tmp_path: Path, docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    index = tmp_path / "index"
    shutil.copytree(docs_index, index)
    live = serve(index, rate_limit_per_minute=0, upload_extensions=(".md", ".rst"))
    with live.client() as c:
        r = c.post("/api/documents", files={"file": ("notes.rst", b"Notes\n=====\n\nText.\n")})
        body = assert_error(r, 400, "file")
        assert body["error"] == "unsupported_file_type"
        assert str(body["message"]).endswith("allowed: .md")  # what the ingest takes
        assert c.post("/api/documents", files={"file": ("ok.md", b"# Ok\n\nText.\n")}).json()[
            "document"
        ]


def test_input_rules_and_error_shape(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        assert_error(c.post("/api/query", json={"question": "<p> <i>a</i> </p>"}), 400, "question")
        long_q = "word " * 300
        assert_error(c.post("/api/query", json={"question": long_q}), 400, "question")
        # HTML is stripped before the length check: 1200 characters of markup, short text
        ok = c.post("/api/search", json={"query": "<span>" * 200 + "chunking"})
        assert ok.status_code == 200 and ok.json()["query"] == "chunking"
        r = c.post("/api/query", json={"question": "what is rrf?", "context": "x " * 1500})
        assert_error(r, 400, "context")
        r = c.post("/api/query", json={"question": "what is rrf?", "max_results": 11})
        assert_error(r, 400, "max_results")
        r = c.post("/api/query", json={"question": "what is rrf?", "max_results": "many"})
        assert_error(r, 400, "max_results")
        r = c.post("/api/query", json={"question": "what is rrf?", "filters": {"color!": "red"}})
        assert_error(r, 400, "filters.color!")
        assert_error(c.post("/api/query", json={"text": "hello"}), 400, "text")  # unknown field
        assert_error(c.post("/api/query", json={"max_results": 3}), 400, "question")
        r = c.post("/api/query", content=b"{not json", headers={"content-type": "application/json"})
        assert_error(r, 400)
        big = b'{"question": "' + b"a" * (docs_server.settings.max_request_bytes + 10) + b'"}'
        r = c.post("/api/query", content=big, headers={"content-type": "application/json"})
        assert_error(r, 413)

        def chunked() -> object:
            for _ in range(20):
                yield b"x" * 65536

        r = c.post("/api/search", content=chunked(), headers={"content-type": "application/json"})
        assert_error(r, 413)
        assert_error(c.get("/api/no-such-thing"), 404)
        assert_error(c.get("/api/query"), 405)


def test_health_ready_metrics_and_ui(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        ready = c.get("/readyz")
        assert ready.status_code == 200 and ready.json()["store"] and ready.json()["model"]
        # warm-up built every lazily made engine part, so no request races to build one
        assert docs_server.rag._retriever is not None
        before = c.get("/metrics").text
        c.post("/api/query", json={"question": "How are chunks embedded?"})
        c.post("/api/query", json={"question": "x"})
        text = c.get("/metrics").text
        assert c.get("/").status_code == 200
        assert "openapi" in c.get("/openapi.json").json()
    ok = metric_value(text, "ragline_http_requests_total", endpoint="/api/query", status="200")
    bad = metric_value(text, "ragline_http_requests_total", endpoint="/api/query", status="400")
    assert ok == metric_value(before, "ragline_http_requests_total", endpoint="/api/query",
                              status="200") + 1  # fmt: skip
    assert bad >= 1
    assert metric_value(text, "ragline_stage_seconds_count", stage="retrieve") >= 1
    assert metric_value(text, "ragline_stage_seconds_count", stage="generate") >= 1
    assert "ragline_fallbacks_total" in text and "ragline_citations_removed_total" in text
    assert "ragline_query_log_failures_total" in text


def test_fallback_is_counted(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        before = metric_value(c.get("/metrics").text, "ragline_fallbacks_total")
        r = c.post("/api/query", json={"question": "What is the boiling point of tungsten?"})
        assert r.status_code == 200
        assert r.json()["metadata"]["fallback"] is True
        after = metric_value(c.get("/metrics").text, "ragline_fallbacks_total")
    assert after == before + 1
