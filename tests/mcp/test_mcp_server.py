"""The MCP server through the official SDK's client, against real server processes:
`ragline mcp` over stdio (a subprocess) and `ragline serve` (a uvicorn process on
127.0.0.1) over streamable HTTP, on a real index holding two tenants."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client, StdioServerParameters
from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.serve.auth import KeyStore
from ragline.settings import Settings

REPO = Path(__file__).resolve().parents[2]
TOOLS = {"search", "ask", "get_document", "get_chunk"}

ALPHA = """# Lighthouse keeping

## The lamp

The keeper trims the paraffin wick every evening before lighting the Fresnel lamp.
A clean wick gives a steady white flame that ships can see twenty miles away.

## Fog

When visibility drops below two miles the keeper sounds the foghorn every thirty
seconds until the fog lifts.
"""

BETA = """# Operation Marmalade

## Codeword

The codeword of Operation Marmalade is bluebell; only the beta team knows it.
The marmalade crates are stored in the harbour cellar behind the red door.
"""

QUESTION_A = "how often does the keeper sound the foghorn in fog?"
QUESTION_B = "what is the codeword of Operation Marmalade?"


@dataclass
class Index:
    path: Path
    keys: dict[str, str]  # tenant -> API key


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Index:
    """Tenant alpha holds the lighthouse notes, tenant beta the marmalade file."""
    root = tmp_path_factory.mktemp("mcp")
    for tenant, text in (("alpha", ALPHA), ("beta", BETA)):
        folder = root / tenant
        folder.mkdir()
        (folder / f"{tenant}.md").write_text(text)
    settings = Settings(index_dir=root / "index")
    rag = Ragline(settings, embedder=embedder)
    try:
        for tenant in ("alpha", "beta"):
            assert rag.ingest(root / tenant, tenant=tenant).indexed == [f"{tenant}.md"]
    finally:
        rag.close()
    store = KeyStore(settings)
    try:
        keys = {tenant: store.create(tenant)[1] for tenant in ("alpha", "beta")}
    finally:
        store.close()
    return Index(root / "index", keys)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def check_cited_answer(body: dict[str, Any], source_name: str) -> None:
    """An answer with [n] markers whose citations carry their spans and a confidence."""
    assert body["metadata"]["fallback"] is False
    assert body["citations"], body
    for c in body["citations"]:
        start, end = c["span"]
        assert body["answer"][start:end] == f"[{c['number']}]"
        s0, s1 = c["support_span"]
        assert 0 <= s0 < s1 and c["support_text"]
        assert c["source"].endswith(source_name)
    assert body["confidence"]["level"] in ("high", "medium", "low")
    assert isinstance(body["confidence"]["score"], float)


# --- stdio: `ragline mcp` ------------------------------------------------------------------


async def _stdio_session(index: Index) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragline", "mcp", "--index", str(index.path), "--tenant", "alpha"],
        env=_env(),
        cwd=str(REPO),
    )
    out: dict[str, Any] = {}
    async with Client(params) as client:
        out["tools"] = {t.name for t in (await client.list_tools()).tools}
        out["ask"] = await client.call_tool("ask", {"question": QUESTION_A})
        found = await client.call_tool("search", {"query": "paraffin wick", "top_k": 2})
        out["search"] = found
        hit = found.structured_content["hits"][0]
        out["document"] = await client.call_tool("get_document", {"doc_id": hit["doc_id"]})
        out["chunk"] = await client.call_tool("get_chunk", {"chunk_id": hit["id"]})
        out["other"] = await client.call_tool("search", {"query": QUESTION_B})
        out["bad"] = await client.call_tool("ask", {"question": "?"})
    return out


def test_stdio_lists_tools_and_answers_with_citations(index: Index) -> None:
    out = anyio.run(_stdio_session, index)
    assert out["tools"] == TOOLS
    assert not out["ask"].is_error
    check_cited_answer(out["ask"].structured_content, "alpha.md")
    assert "thirty" in out["ask"].structured_content["answer"]
    hit = out["search"].structured_content["hits"][0]
    assert hit["section"] == "The lamp" and "paraffin" in hit["snippet"]
    doc = out["document"].structured_content
    assert doc["title"] == "Lighthouse keeping" and doc["chunk_count"] == len(doc["chunks"])
    assert hit["id"] in {c["chunk_id"] for c in doc["chunks"]}
    chunk = out["chunk"].structured_content
    assert chunk["chunk_id"] == hit["id"] and "Fresnel lamp" in chunk["text"]
    # the stdio server works in its tenant only: beta's file is never a hit
    assert all(h["tenant"] == "alpha" for h in out["other"].structured_content["hits"])
    assert out["bad"].is_error and "question" in out["bad"].content[0].text


# --- streamable HTTP: /mcp on `ragline serve` ---------------------------------------------


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def served(index: Index, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`ragline serve` in its own process, API keys required, on a free loopback port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _env(RAGLINE_API_KEYS_ENABLED="true", RAGLINE_RATE_LIMIT_PER_MINUTE="0")
    cmd = [sys.executable, "-m", "ragline", "serve", "--port", str(port)]
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    with log.open("wb") as sink:  # a file, not a pipe: a full pipe would block the server
        proc = subprocess.Popen(
            [*cmd, "--index", str(index.path)], env=env, cwd=str(REPO), stdout=sink, stderr=sink
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"ragline serve did not become ready: {err}")
            time.sleep(0.1)
        yield Served(url, proc)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _http_calls(url: str, key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        results: list[Any] = [{t.name for t in (await client.list_tools()).tools}]
        for name, args in calls:
            results.append(await client.call_tool(name, args))
        return results


def test_http_lists_tools_and_answers_in_the_keys_tenant(index: Index, served: Served) -> None:
    tools, answer, hits = anyio.run(
        _http_calls,
        served.url,
        index.keys["beta"],
        [("ask", {"question": QUESTION_B}), ("search", {"query": QUESTION_B, "top_k": 5})],
    )
    assert tools == TOOLS
    assert not answer.is_error
    body = answer.structured_content
    check_cited_answer(body, "beta.md")
    assert "bluebell" in body["answer"]
    # the same key over the HTTP API sees the same hits: scoping is the API's
    api = httpx.post(
        f"{served.url}/api/search",
        json={"query": QUESTION_B, "max_results": 5},
        headers={"Authorization": f"Bearer {index.keys['beta']}"},
        timeout=60,
    )
    assert api.status_code == 200
    mcp_ids = [h["id"] for h in hits.structured_content["hits"]]
    assert mcp_ids == [h["id"] for h in api.json()["hits"]]
    assert {h["tenant"] for h in hits.structured_content["hits"]} == {"beta"}
    # the calls are in the query log like the API's, under the key's tenant
    with sqlite3.connect(index.path / "querylog.sqlite3") as db:
        rows = db.execute(
            "SELECT endpoint, tenant, citations FROM query_log WHERE endpoint LIKE '/mcp:%'"
        ).fetchall()
    assert ("/mcp:ask", "beta", len(body["citations"])) in rows
    assert ("/mcp:search", "beta", 0) in rows


def test_http_tenant_a_never_sees_tenant_b(index: Index, served: Served) -> None:
    (_, beta_hits) = anyio.run(
        _http_calls, served.url, index.keys["beta"], [("search", {"query": "marmalade"})]
    )
    beta = beta_hits.structured_content["hits"][0]
    _, search, answer, doc, chunk = anyio.run(
        _http_calls,
        served.url,
        index.keys["alpha"],
        [
            ("search", {"query": "Operation Marmalade codeword bluebell", "top_k": 10}),
            ("ask", {"question": QUESTION_B}),
            ("get_document", {"doc_id": beta["doc_id"]}),
            ("get_chunk", {"chunk_id": beta["id"]}),
        ],
    )
    assert {h["tenant"] for h in search.structured_content["hits"]} <= {"alpha"}
    assert "bluebell" not in str(answer.structured_content)
    assert all(c["source"].endswith("alpha.md") for c in answer.structured_content["citations"])
    assert doc.is_error and "no such document" in doc.content[0].text
    assert chunk.is_error and "no such chunk" in chunk.content[0].text


def test_http_refuses_calls_without_a_valid_key(served: Served) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(f"{served.url}/mcp", json=init, headers=headers, timeout=30)
    assert missing.status_code == 401 and "API key is required" in missing.json()["message"]
    bad = httpx.post(
        f"{served.url}/mcp",
        json=init,
        headers={**headers, "Authorization": "Bearer rl_0123456789abcdef_" + "x" * 43},
        timeout=30,
    )
    assert bad.status_code == 401 and "not valid" in bad.json()["message"]


def test_http_search_takes_filters_within_the_keys_tenant(index: Index, served: Served) -> None:
    """The search tool's filters argument: the JSON syntax of the HTTP API, checked by
    the same parser, and ANDed with the key's tenant (an $or naming another tenant
    cannot widen it)."""
    _, fog, escape, bad, none = anyio.run(
        _http_calls,
        served.url,
        index.keys["alpha"],
        [
            (
                "search",
                {
                    "query": "keeper foghorn lamp",
                    "filters": {"title": {"$in": ["Lighthouse keeping", "x"]}},
                },
            ),
            (
                "search",
                {
                    "query": "marmalade codeword",
                    "filters": {"$or": [{"tenant": "beta"}, {"section": {"$exists": True}}]},
                },
            ),
            ("search", {"query": "fog", "filters": {"section": {"$gt": True}}}),
            ("search", {"query": "fog", "filters": {"title": {"$ne": "Lighthouse keeping"}}}),
        ],
    )
    hits = fog.structured_content["hits"]
    assert hits and {h["title"] for h in hits} == {"Lighthouse keeping"}
    assert {h["tenant"] for h in escape.structured_content["hits"]} <= {"alpha"}
    assert not none.is_error and none.structured_content["hits"] == []
    assert bad.is_error and "'section' $gt" in bad.content[0].text
