""":class:`ServeMiddleware` (pure ASGI), the outermost layer of ragline's own: request
metrics, the body size cap (413), the per-IP rate limit on ``POST /api/*`` and
``/v1/*`` (429 + ``Retry-After``), API-key → tenant (401), and a last-resort 500 that
never leaks a traceback. It runs before any body is parsed."""

from __future__ import annotations

import asyncio
import time
from typing import cast

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline.serve import requestlog
from ragline.serve.auth import bearer_key
from ragline.serve.errors import error_response
from ragline.serve.routing import flat_routes
from ragline.serve.state import Caller, ServeState, log

#: Room for the multipart envelope around an uploaded file.
MULTIPART_OVERHEAD = 64 * 1024
UPLOAD_PATH = "/api/documents"
#: Bytes of an error response kept to log its message.
ERROR_BODY_KEPT = 4096
#: Where the middleware leaves the :class:`Caller` on the ASGI scope.
CALLER_KEY = "ragline.caller"
#: Request paths whose route template the middleware remembers at most.
ENDPOINT_MEMORY = 4096


class BodyTooLarge(StarletteHTTPException):
    """Raised from ``receive`` when a body grows past its cap (chunked uploads)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit:,} bytes")


def client_ip(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return cast(bytes, value).decode("latin-1")
    return None


class ServeMiddleware:
    """Metrics, body cap, rate limit, authentication: before any body is parsed."""

    def __init__(self, app: ASGIApp, state: ServeState, fastapi_app: FastAPI) -> None:
        self.app = app
        self.state = state
        self.fastapi_app = fastapi_app
        self._endpoints: dict[tuple[str, str, str], str] = {}

    def _endpoint(self, scope: Scope) -> str:
        """The route template (``/api/documents/{doc_id}``): bounded metric labels.

        Remembered per (method, path): matching walks every route, a cost paid on each
        request otherwise. The routes are fixed once the app is built; the memory is
        bounded (cleared when full: paths with ids in them are endless).
        """
        key = (scope["method"], scope.get("root_path", ""), scope["path"])
        found = self._endpoints.get(key)
        if found is None:
            found = self._match_endpoint(scope)
            if len(self._endpoints) >= ENDPOINT_MEMORY:
                self._endpoints.clear()
            self._endpoints[key] = found
        return found

    def _match_endpoint(self, scope: Scope) -> str:
        partial = ""
        for route in flat_routes(self.fastapi_app.router.routes):
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(getattr(route, "path", scope["path"]))
            if match is Match.PARTIAL and not partial:
                partial = str(getattr(route, "path", scope["path"]))
        if partial:
            return partial
        return "/static" if scope["path"].startswith("/static/") else "unmatched"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = self.state
        metrics = state.metrics
        method = scope["method"]
        path = scope["path"]
        endpoint = self._endpoint(scope)
        started = time.perf_counter()
        status = 500
        response_started = False
        logged = method == "POST" and endpoint in requestlog.LOGGED_ENDPOINTS
        request_body = bytearray()
        error_body = bytearray()
        token = requestlog.begin()
        crash: str | None = None  # the unhandled error, for the log row (never the client)

        async def send_wrapper(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = int(message["status"])
                response_started = True
                metrics.request_seconds.labels(endpoint=endpoint).observe(
                    time.perf_counter() - started
                )
            elif message["type"] == "http.response.body" and logged and status >= 400:
                error_body.extend(message.get("body", b"")[: ERROR_BODY_KEPT - len(error_body)])
            await send(message)

        try:
            refusal = await self._check(scope, method, path)
            if refusal is not None:
                await refusal(scope, receive, send_wrapper)
                return
            limit = self._body_limit(method, path)
            keep = request_body if logged else None
            await self.app(scope, _capped(receive, limit, keep), send_wrapper)
        except Exception as exc:
            if isinstance(exc, BodyTooLarge) and not response_started:
                await error_response(413, str(exc.detail))(scope, receive, send_wrapper)
                return
            if isinstance(exc, OSError | asyncio.CancelledError) and response_started:
                raise  # the client went away mid-response: nothing left to send
            log.exception("unhandled error on %s %s", method, path)
            crash = f"{type(exc).__name__}: {exc}"
            if not response_started:
                await error_response(500, "internal server error; the error was logged")(
                    scope, receive, send_wrapper
                )
        finally:
            metrics.requests.labels(endpoint=endpoint, method=method, status=str(status)).inc()
            if not requestlog.end(token) and logged:
                error = crash.encode() if crash else bytes(error_body)
                await self._log_refused(scope, endpoint, bytes(request_body), status, error,
                                        started, raw=crash is not None)  # fmt: skip

    async def _log_refused(
        self, scope: Scope, endpoint: str, body: bytes, status: int, error: bytes, started: float,
        *, raw: bool = False,
    ) -> None:  # fmt: skip
        """The row of a request no handler logged (refused before it, or a crash)."""
        state = self.state
        found = scope.get(CALLER_KEY)
        caller = (
            found if isinstance(found, Caller) else Caller(state.settings.tenant, client_ip(scope))
        )
        try:
            row = requestlog.refused_row(
                state, caller, endpoint, body, status,
                error.decode() if raw else requestlog.error_message(error),
                (time.perf_counter() - started) * 1000.0,
            )  # fmt: skip
            await run_in_threadpool(state.log_row, row)
        except Exception as exc:  # the log never fails a request
            log.warning("query log row for a refused request failed: %s", exc)
            state.metrics.query_log_failures.inc()

    def _body_limit(self, method: str, path: str) -> int:
        s_ = self.state.settings
        if method == "POST" and path == UPLOAD_PATH:
            return s_.max_upload_bytes + MULTIPART_OVERHEAD
        return s_.max_request_bytes

    async def _check(self, scope: Scope, method: str, path: str) -> ASGIApp | None:
        """A response refusing the request (413, 429, 401), or None to go on; sets the
        caller (tenant, IP) on the scope."""
        state = self.state
        api = path.startswith(("/api/", "/v1/"))
        length = _header(scope, b"content-length")
        limit = self._body_limit(method, path)
        if length is not None:
            try:
                too_big = int(length) > limit
            except ValueError:
                return error_response(400, "Content-Length is not a number")
            if too_big:
                return error_response(413, f"the request body is larger than {limit:,} bytes")
        ip = client_ip(scope)
        if api and method == "POST":
            limiter = state.limiter
            if limiter.blocking:
                decision = await run_in_threadpool(limiter.hit, ip)
            else:
                decision = limiter.hit(ip)
            if not decision.allowed:
                state.metrics.rate_limited.inc()
                wait = decision.retry_after_header
                return error_response(
                    429,
                    f"rate limit of {decision.limit} requests per minute reached; "
                    f"retry in {wait} s (the server's RAGLINE_RATE_LIMIT_PER_MINUTE "
                    "raises it; 0 turns it off)",
                    extra={"retry_after": int(wait)},
                    headers={
                        "Retry-After": wait,
                        "RateLimit-Limit": str(decision.limit),
                        "RateLimit-Remaining": "0",
                    },
                )
        tenant = state.settings.tenant
        if api and state.keys is not None:
            key = bearer_key(_header(scope, b"authorization"), _header(scope, b"x-api-key"))
            found = await run_in_threadpool(state.keys.tenant_for, key) if key else None
            if found is None:
                return error_response(
                    401,
                    "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key'"
                    if key is None
                    else "the API key is not valid (unknown or revoked)",
                    headers={"WWW-Authenticate": "Bearer"},
                )
            tenant = found
        scope[CALLER_KEY] = Caller(tenant=tenant, ip=ip)
        return None


def _capped(receive: Receive, limit: int, keep: bytearray | None = None) -> Receive:
    """``receive`` that raises past ``limit`` bytes and copies the body into ``keep``."""
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > limit:
                raise BodyTooLarge(limit)
            if keep is not None:
                keep.extend(chunk)
        return message

    return capped
