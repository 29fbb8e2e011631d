"""The MCP server: tools ``search``, ``ask``, ``get_document`` and ``get_chunk`` over
one index, on the official MCP Python SDK (``MCPServer``).

Every tool works in one tenant, which :class:`ToolBackend` resolves for each call: the
configured tenant over stdio (``ragline mcp``), the API key's tenant over HTTP
(``/mcp`` on ``ragline serve``, see :mod:`ragline.serve.mcp`). Search filters always
carry that tenant, and a document or chunk of another tenant is as absent as an
unknown one, as in the HTTP API. Engine calls block, so they run in worker threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal, Protocol

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from ragline.answer.answerer import SearchOptions
from ragline.engine import Ragline
from ragline.filter_input import request_filters
from ragline.mcp.tools import ask_payload, chunk_payload, document_payload, search_payload
from ragline.store.base import StoreError
from ragline.types import Answer, DocumentRecord, SearchResult
from ragline.validation import (
    MARKUP_FACTOR,
    RequestProblem,
    check_range,
    check_unicode,
    clean_field,
    clean_text,
)

INSTRUCTIONS = (
    "ragline answers questions from an indexed document collection. Use `ask` for a "
    "cited answer (each [n] marker has a citation with the supporting passage and a "
    "confidence level), `search` for ranked passages, `get_document` for a document's "
    "outline and `get_chunk` for a passage's full text."
)

Mode = Literal["hybrid", "bm25", "vector"]

log = logging.getLogger("ragline.mcp")

#: A history message's raw length limit, as on /v1/chat/completions.
MAX_TURN_CHARS = MARKUP_FACTOR * 2000


class Turn(BaseModel):
    """An earlier message of the conversation, for the ``ask`` tool's ``history``."""

    role: Literal["user", "assistant"]
    content: str = Field(max_length=MAX_TURN_CHARS)


class ToolBackend(Protocol):
    """Where the tools get their tenant and their answers."""

    rag: Ragline

    def tenant(self, ctx: Context) -> str:
        """The tenant of this call (raises ToolError when the caller has none)."""
        ...

    def answer(
        self,
        tenant: str,
        question: str,
        history: list[dict[str, str]],
        options: SearchOptions,
    ) -> Answer:
        """A cited answer searched within ``tenant`` (``options`` carry its filter),
        a follow-up of ``history`` (the earlier messages, oldest first)."""
        ...

    def ready(self) -> None:
        """Block until the engine may be used (a server's warm-up builds its parts once);
        raises ToolError when it never will."""
        ...

    def record(self, ctx: Context, tool: str, text: str, result: SearchResult | Answer) -> None:
        """Note a search or an answer where the backend keeps such notes (the query log)."""
        ...


class LocalBackend:
    """One process, one tenant: ``ragline mcp`` over stdio."""

    def __init__(self, rag: Ragline, tenant: str) -> None:
        self.rag = rag
        self._tenant = tenant

    def tenant(self, ctx: Context) -> str:
        return self._tenant

    def answer(
        self,
        tenant: str,
        question: str,
        history: list[dict[str, str]],
        options: SearchOptions,
    ) -> Answer:
        return self.rag.ask(question, history=history, **options)

    def ready(self) -> None:
        """Parts are built on first use: one process, one caller at a time over stdio."""

    def record(self, ctx: Context, tool: str, text: str, result: SearchResult | Answer) -> None:
        """The query log belongs to `ragline serve`; a local process keeps none."""


def build_server(backend: ToolBackend, name: str = "ragline") -> MCPServer:
    """An MCP server whose tools read ``backend.rag`` within each call's tenant."""
    rag = backend.rag
    settings = rag.settings
    server: MCPServer = MCPServer(
        name, instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING"
    )

    def options(
        tenant: str, top_k: int | None, mode: Mode | None, filters: dict[str, Any] | None = None
    ) -> SearchOptions:
        if top_k is not None:
            top_k = check_range(top_k, "top_k", low=1, high=settings.max_results_limit)
        scope = request_filters(filters, settings, tenant)  # the caller's tenant, always
        return SearchOptions(mode=mode, top_k=top_k, filters=scope)

    def text(value: str, field: str) -> str:
        return clean_field(
            value,
            field,
            min_chars=settings.min_question_chars,
            max_chars=settings.max_question_chars,
        )

    def turns(history: list[Turn] | None) -> list[dict[str, str]]:
        """The earlier messages, cleaned as /v1/chat/completions cleans its own."""
        history = history or []
        if len(history) > settings.max_chat_messages:
            raise RequestProblem(
                f"at most {settings.max_chat_messages} history messages are allowed, "
                f"got {len(history)}",
                field="history",
            )
        out = []
        for i, turn in enumerate(history):
            text = clean_text(check_unicode(turn.content, f"history.{i}.content"))
            if text:
                out.append({"role": turn.role, "content": text})
        return out

    async def run(fn: Callable[[], Any]) -> Any:
        """An engine call in a worker thread, its expected failures as tool errors."""

        def call() -> Any:
            backend.ready()
            return fn()

        try:
            return await anyio.to_thread.run_sync(call)
        except RequestProblem as e:
            raise ToolError(e.message) from None
        except StoreError as e:  # its message may name SQL, paths or tenants: logged only
            log.error("MCP tool failed on the store: %s", e)
            raise ToolError("the index is not available; try again shortly") from None
        except ValueError as e:
            raise ToolError(str(e)) from None

    def owned(tenant: str, doc_id: str) -> DocumentRecord:
        for rec in rag.store.documents(tenant):
            if rec.doc_id == doc_id:
                return rec
        raise RequestProblem(f"doc_id {doc_id!r}: no such document", field="doc_id")

    @server.tool()
    async def search(
        query: str,
        ctx: Context,
        top_k: int | None = None,
        mode: Mode | None = None,
        filters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Ranked passages for a query (hybrid BM25 + vector search by default); each hit
        has its chunk_id, doc_id, title > section, source URL or path, score and snippet.
        'filters' narrows the search by chunk fields and front-matter keys, e.g.
        {"date": {"$gte": "2024-01-01"}, "$or": [{"draft": false}, {"version": 3}]}
        (operators $eq $ne $in $nin $gt $gte $lt $lte $exists, $and/$or/$not)."""
        tenant = backend.tenant(ctx)

        def go() -> dict[str, Any]:
            q = text(query, "query")
            found = rag.search(q, **options(tenant, top_k, mode, filters))
            backend.record(ctx, "search", q, found)
            return search_payload(found, settings.mcp_snippet_chars)

        result: dict[str, Any] = await run(go)
        return result

    @server.tool()
    async def ask(
        question: str,
        ctx: Context,
        top_k: int | None = None,
        mode: Mode | None = None,
        history: list[Turn] | None = None,
        filters: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A grounded answer with [n] citations: each citation names its source and the
        span of the supporting sentence; 'confidence' says how far to trust it. When the
        collection does not cover the question, the answer says so (metadata.fallback).
        'history' holds the conversation so far (oldest first), for a follow-up
        question; metadata.search_query shows what was searched. 'filters' narrows the
        search as in the search tool."""
        tenant = backend.tenant(ctx)

        def go() -> dict[str, Any]:
            q = text(question, "question")
            scope = options(tenant, top_k, mode, filters)
            answer = backend.answer(tenant, q, turns(history), scope)
            backend.record(ctx, "ask", q, answer)
            return ask_payload(answer)

        result: dict[str, Any] = await run(go)
        return result

    @server.tool()
    async def get_document(doc_id: str, ctx: Context) -> dict[str, Any]:
        """A document's record (title, source, format, counts) and its outline: one entry
        per chunk with chunk_id, section and page."""
        tenant = backend.tenant(ctx)

        def go() -> dict[str, Any]:
            rec = owned(tenant, doc_id.strip())
            chunks = rag.store.chunks_by_index(rec.doc_id, range(rec.chunk_count))
            return document_payload(rec, sorted(chunks, key=lambda c: c.chunk_index))

        result: dict[str, Any] = await run(go)
        return result

    @server.tool()
    async def get_chunk(chunk_id: str, ctx: Context) -> dict[str, Any]:
        """A passage's full text and where it sits (document, section, offsets, page)."""
        tenant = backend.tenant(ctx)

        def go() -> dict[str, Any]:
            cid = chunk_id.strip()
            pair = rag.store.chunks_with_vectors([cid]).get(cid)
            found = pair[0] if pair else None
            if found is None or found.tenant != tenant:
                raise RequestProblem(f"chunk_id {chunk_id!r}: no such chunk", field="chunk_id")
            return chunk_payload(found)

        result: dict[str, Any] = await run(go)
        return result

    return server
