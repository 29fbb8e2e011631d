"""One answer path: a server answers with the pipeline `Ragline` builds.

A two-turn conversation goes through ``/api/query``, ``/api/chat``,
``/v1/chat/completions``, the MCP ``ask`` tool over streamable HTTP (``/mcp`` of the
same server) and over stdio (``ragline mcp``). Each must search the follow-up as
``Ragline.ask`` with that history searches it (what ``ragline ask --history`` runs):
made self-contained with the first question's terms, not as typed. Multi-query
rewriting works over HTTP too, its streamed citations naming the fused sources. A
real server on 127.0.0.1, the official MCP client, small real indexes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Unpack

import anyio
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client, StdioServerParameters
from ragline.answer.answerer import SearchOptions
from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.settings import Settings
from ragline.types import SearchResult

from .conftest import LiveServer, sse_events, start_server, stop_server

REPO = Path(__file__).resolve().parents[2]

NOTES = """# Lighthouse keeping

## The lamp

The keeper trims the paraffin wick every evening before lighting the Fresnel lamp.
A clean wick gives a steady white flame that ships can see twenty miles away.

## Fog

When visibility drops below two miles the keeper sounds the foghorn every thirty
seconds until the fog lifts.
"""

FIRST = "How often does the keeper sound the foghorn in fog?"
FOLLOW_UP = "And when does it stop?"


class Recording(Ragline):
    """The engine noting each query it searches: every path's retrieval ends here."""

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        super().__init__(settings, embedder=embedder)
        self.searched: list[str] = []

    def search(self, query: str, **options: Unpack[SearchOptions]) -> SearchResult:
        self.searched.append(query)
        return super().search(query, **options)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    root = tmp_path_factory.mktemp("follow-up")
    (root / "notes").mkdir()
    (root / "notes" / "lighthouse.md").write_text(NOTES)
    rag = Ragline(Settings(index_dir=root / "index"), embedder=embedder)
    try:
        assert rag.ingest(root / "notes").indexed == ["lighthouse.md"]
    finally:
        rag.close()
    return root / "index"


@pytest.fixture(scope="module")
def live(index: Path, embedder: Embedder) -> Iterator[LiveServer]:
    settings = Settings(index_dir=index, rate_limit_per_minute=0)
    server = start_server(settings, embedder, rag=Recording(settings, embedder))
    yield server
    stop_server(server)


def history(answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": FIRST}, {"role": "assistant", "content": answer}]


def searched(live: LiveServer) -> str:
    """The query the server's engine searched last."""
    assert isinstance(live.rag, Recording) and live.rag.searched
    return live.rag.searched[-1]


def via_chat(live: LiveServer) -> tuple[str, str]:
    with live.client() as c:
        first = sse_events(c.post("/api/chat", json={"question": FIRST}).text)
        conversation = first[-1][1]["conversation_id"]
        body = {"question": FOLLOW_UP, "conversation_id": conversation}
        done = sse_events(c.post("/api/chat", json=body).text)[-1]
    assert done[0] == "done", done
    return done[1]["answer"]["metadata"]["search_query"], searched(live)


def via_query(live: LiveServer) -> tuple[str, str]:
    """/api/query continues a conversation that /api/chat started (only chat starts one)."""
    with live.client() as c:
        first = sse_events(c.post("/api/chat", json={"question": FIRST}).text)
        body = {"question": FOLLOW_UP, "conversation_id": first[-1][1]["conversation_id"]}
        r = c.post("/api/query", json=body)
    assert r.status_code == 200, r.text
    return r.json()["metadata"]["search_query"], searched(live)


def via_completions(live: LiveServer) -> str:
    """The OpenAI shape carries no metadata: what the engine searched tells."""
    model = live.settings.serve_model_name
    with live.client() as c:
        body = {"model": model, "messages": [history("")[0]]}
        first = c.post("/v1/chat/completions", json=body)
        assert first.status_code == 200, first.text
        said = first.json()["choices"][0]["message"]["content"]
        messages = [*history(said), {"role": "user", "content": FOLLOW_UP}]
        r = c.post("/v1/chat/completions", json={"model": model, "messages": messages})
    assert r.status_code == 200, r.text
    return searched(live)


async def _ask_twice(client: Client) -> dict[str, Any]:
    first = await client.call_tool("ask", {"question": FIRST})
    assert not first.is_error, first.content
    args = {"question": FOLLOW_UP, "history": history(first.structured_content["answer"])}
    second = await client.call_tool("ask", args)
    assert not second.is_error, second.content
    result: dict[str, Any] = second.structured_content
    return result


def via_mcp_http(live: LiveServer) -> tuple[str, str]:
    async def go() -> dict[str, Any]:
        async with (
            httpx2.AsyncClient(timeout=120) as http,
            Client(streamable_http_client(f"{live.url}/mcp", http_client=http)) as client,
        ):
            return await _ask_twice(client)

    body = anyio.run(go)
    return body["metadata"]["search_query"], searched(live)


def via_mcp_stdio(index: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragline", "mcp", "--index", str(index)],
        env=env,
        cwd=str(REPO),
    )

    async def go() -> dict[str, Any]:
        async with Client(params) as client:
            return await _ask_twice(client)

    query: str = anyio.run(go)["metadata"]["search_query"]
    return query


def test_a_follow_up_is_searched_alike_on_every_path(
    index: Path, live: LiveServer, embedder: Embedder
) -> None:
    rag = Ragline(Settings(index_dir=index), embedder=embedder)
    try:
        first = rag.ask(FIRST)
        expected = rag.ask(FOLLOW_UP, history=history(first.text))
    finally:
        rag.close()
    assert expected.query_rewrite == "carry-over"
    assert expected.search_query.startswith(f"{FOLLOW_UP} ") and "foghorn" in expected.search_query
    chat, chat_searched = via_chat(live)
    query, query_searched = via_query(live)
    mcp_http, mcp_http_searched = via_mcp_http(live)
    got = {
        "/api/chat": chat,
        "/api/chat searched": chat_searched,
        "/api/query": query,
        "/api/query searched": query_searched,
        "/v1/chat/completions searched": via_completions(live),
        "/mcp ask": mcp_http,
        "/mcp ask searched": mcp_http_searched,
        "ragline mcp (stdio) ask": via_mcp_stdio(index),
    }
    assert got == dict.fromkeys(got, expected.search_query)


KETTLE = "# Kettle\n\nThe kettle boils water for tea in about three minutes.\n"
LIMESCALE = (
    "# Limescale\n\nVinegar dissolves limescale deposits inside appliances. "
    "Rinse twice with fresh water afterwards.\n"
)


def test_multi_query_over_http_cites_the_fused_sources(
    tmp_path: Path,
    embedder: Embedder,
    serve: Callable[..., LiveServer],
    llm: tuple[str, Any],
) -> None:
    """RAGLINE_MULTI_QUERY on /api/chat: the phrasings are searched and fused, and each
    streamed citation names the block of the fused context the answer cites."""
    url, script = llm
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kettle.md").write_text(KETTLE)
    (docs / "limescale.md").write_text(LIMESCALE)
    rag = Ragline(Settings(index_dir=tmp_path / "index"), embedder=embedder)
    try:
        rag.ingest(docs)
    finally:
        rag.close()
    live = serve(
        tmp_path / "index", rate_limit_per_minute=0, generator="openai", llm_base_url=url,
        llm_model="m", llm_max_retries=0, multi_query=True, evidence_check=False,
    )  # fmt: skip
    # the phrasings (the last finds the limescale page only), then the answer
    script.script = [
        ("stream", ["1. Remove limescale deposits\n", "2. vinegar descaling"], "done"),
        ("stream", ["Vinegar dissolves limescale [1]. The kettle boils water [2]."], "done"),
    ]
    body = {"question": "How do I clean the kettle?", "mode": "bm25"}
    with live.client() as c:
        events = sse_events(c.post("/api/chat", json=body).text)
    assert events[-1][0] == "done", events
    answer = events[-1][1]["answer"]
    meta = answer["metadata"]
    assert meta["query_expansion"] == "llm"
    assert meta["search_phrasings"] == ["Remove limescale deposits", "vinegar descaling"]
    files = [s["source"].rsplit("/", 1)[-1] for s in answer["sources"]]
    assert files == ["limescale.md", "kettle.md"]
    cited = {d["number"]: d["source"] for name, d in events if name == "citation"}
    assert sorted(cited) == [1, 2]
    for number, source in cited.items():
        assert source is not None, number
        assert source["chunk_ids"] == answer["sources"][number - 1]["chunk_ids"]
