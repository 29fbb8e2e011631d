"""The MCP endpoint of `ragline serve`: streamable HTTP at ``/mcp``.

:func:`mount_mcp` adds one route and wraps the app's lifespan so the SDK's session
manager runs with it. A small ASGI gate in front of the SDK does what the HTTP API's
middleware does for ``/api/*``: the per-IP rate limit on POSTs (429) and, with API
keys enabled, the key → tenant lookup (401 without a valid key). The caller it
finds rides on the ASGI scope, where the tools read it: a tenant A key never sees
tenant B's documents. The server is stateless (each POST stands alone), so workers
behind a load balancer need no shared session store.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ragline.answer.answerer import SearchOptions
from ragline.engine import Ragline
from ragline.mcp.server import build_server
from ragline.serve.auth import bearer_key
from ragline.serve.state import AnswerRun, Caller, ServeState, new_query_id
from ragline.types import Answer, SearchResult

MCP_PATH = "/mcp"
CALLER_KEY = "ragline.mcp.caller"


class HttpBackend:
    """Tools served by a running app: its engine, its callers' tenants."""

    def __init__(self, state: ServeState) -> None:
        self.state = state
        self.rag: Ragline = state.rag

    def caller(self, ctx: Context) -> Caller:
        request = ctx.request_context.request
        scope = getattr(request, "scope", None) or {}
        caller = scope.get(CALLER_KEY)
        if not isinstance(caller, Caller):  # the gate always sets it: never guess a tenant
            raise ToolError("unauthenticated MCP call")
        return caller

    def tenant(self, ctx: Context) -> str:
        return self.caller(ctx).tenant

    def record(self, ctx: Context, tool: str, text: str, result: SearchResult | Answer) -> None:
        """A query log row, as the HTTP API writes one (endpoint ``/mcp:<tool>``)."""
        state = self.state
        row = state.start_row(self.caller(ctx), f"{MCP_PATH}:{tool}", text, new_query_id())
        if isinstance(result, Answer):
            row.record_answer(result)
        else:
            row.retrieved_chunk_ids = [h.chunk.id for h in result.hits]
            row.latencies_ms = dict(result.timings_ms)
        state.log_row(row)

    def answer(
        self,
        tenant: str,
        question: str,
        history: list[dict[str, str]],
        options: SearchOptions,
    ) -> Answer:
        return AnswerRun(self.state, tenant).answer(question, history, None, options)

    def ready(self) -> None:
        """Engine parts are built once by the app's warm-up: never race it."""
        waited = 0.0
        while not self.state.ready:
            if self.state.ready_error:  # the details are in the server's log
                raise ToolError("the index is not available; try again shortly")
            if waited >= self.state.settings.mcp_ready_timeout_s:
                raise ToolError("the server is starting; retry in a moment")
            time.sleep(0.1)  # in a worker thread: the event loop goes on
            waited += 0.1


def _refuse(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    codes = {401: "unauthorized", 429: "rate_limited"}
    body = {"error": codes.get(status, "error"), "message": message, "status_code": status}
    return JSONResponse(body, status_code=status, headers=headers)


class McpGate:
    """Rate limit and API key → tenant, then the SDK's handler."""

    def __init__(self, handler: ASGIApp, state: ServeState) -> None:
        self.handler = handler
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.state
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client")
        ip = str(client[0]) if client else "unknown"
        if scope["method"] == "POST":
            decision = await run_in_threadpool(state.limiter.hit, ip)
            if not decision.allowed:
                state.metrics.rate_limited.inc()
                wait = decision.retry_after_header
                msg = (
                    f"rate limit of {decision.limit} requests per minute reached; retry in {wait} s"
                )
                await _refuse(429, msg, {"Retry-After": wait})(scope, receive, send)
                return
        tenant = state.settings.tenant
        if state.keys is not None:
            key = bearer_key(headers.get("authorization"), headers.get("x-api-key"))
            found = await run_in_threadpool(state.keys.tenant_for, key) if key else None
            if found is None:
                msg = (
                    "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key'"
                    if key is None
                    else "the API key is not valid (unknown or revoked)"
                )
                await _refuse(401, msg, {"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
            tenant = found
        scope[CALLER_KEY] = Caller(tenant=tenant, ip=ip)
        await self.handler(scope, receive, send)


def mount_mcp(app: FastAPI, state: ServeState) -> None:
    """Serve the MCP tools at ``/mcp`` on ``app`` (streamable HTTP, JSON responses)."""
    server = build_server(HttpBackend(state))
    server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=state.settings.serve_host,
        max_request_body_size=state.settings.max_request_bytes,
    )
    manager = server.session_manager
    gate = McpGate(manager.handle_request, state)
    app.router.routes.append(
        Route(MCP_PATH, endpoint=gate, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with manager.run(), inner(a) as value:
            yield value

    app.router.lifespan_context = lifespan
