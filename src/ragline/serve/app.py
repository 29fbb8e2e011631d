"""The HTTP service: ``create_app(settings)`` builds the FastAPI app `ragline serve` runs.

Layers, outside in:

1. :class:`ServeMiddleware` (pure ASGI): request metrics, the body size cap (413),
   the per-IP rate limit on ``POST /api/*`` and ``/v1/*`` (429 + ``Retry-After``),
   API-key → tenant (401), and a last-resort 500 that never leaks a traceback;
2. exception handlers that give every error one JSON shape,
   ``{"error", "message", "status_code"}`` (FastAPI's 422 becomes a 400 naming the field);
3. the handlers, which clean and check their input (:mod:`ragline.serve.validation`),
   force the caller's tenant into every filter, and run the blocking engine in
   worker threads (:mod:`ragline.serve.state` says what is shared and how it is guarded).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path, PurePath
from typing import Annotated, Any, cast

import anyio.to_thread
from fastapi import Depends, FastAPI, File, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragline.answer.answerer import SearchOptions
from ragline.engine import Ragline
from ragline.ingest.records import doc_id_for
from ragline.serve import schemas as s
from ragline.serve.auth import bearer_key
from ragline.serve.conversations import Conversation
from ragline.serve.documents import UploadRecord, now_iso
from ragline.serve.metrics import CONTENT_TYPE
from ragline.serve.sse import format_event, iterate_in_thread
from ragline.serve.state import AnswerRun, Caller, ServeState, log, new_query_id
from ragline.serve.validation import (
    RequestProblem,
    check_range,
    check_upload_content,
    clean_field,
    upload_name,
)
from ragline.settings import Settings
from ragline.store.base import StoreError
from ragline.store.filters import to_sql_predicate
from ragline.types import Answer, DocumentRecord, Filters

STATIC_DIR = Path(__file__).with_name("static")
#: Room for the multipart envelope around an uploaded file.
MULTIPART_OVERHEAD = 64 * 1024
UPLOAD_PATH = "/api/documents"
CALLER_KEY = "ragline.caller"

ERROR_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": s.ErrorBody, "description": ERROR_CODES[code].replace("_", " ")}
    for code in (400, 401, 413, 429, 500, 503)
}


#: One server-sent event as clients parse it (each ``data`` is one JSON document).
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "event": {"type": "string", "enum": ["token", "citation", "done", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
    "required": ["data"],
}


def error_response(
    status: int,
    message: str,
    *,
    code: str = "",
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The one error shape of the API."""
    body: dict[str, Any] = {
        "error": code or ERROR_CODES.get(status, "error"),
        "message": message,
        "status_code": status,
    }
    if field:
        body["field"] = field
    return JSONResponse(body, status_code=status, headers=headers)


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

    def _endpoint(self, scope: Scope) -> str:
        """The route template (``/api/documents/{doc_id}``): bounded metric labels."""
        partial = ""
        for route in self.fastapi_app.router.routes:
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

        async def send_wrapper(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = int(message["status"])
                response_started = True
                metrics.request_seconds.labels(endpoint=endpoint).observe(
                    time.perf_counter() - started
                )
            await send(message)

        try:
            refusal = await self._check(scope, method, path)
            if refusal is not None:
                await refusal(scope, receive, send_wrapper)
                return
            limit = self._body_limit(method, path)
            await self.app(scope, _capped(receive, limit), send_wrapper)
        except Exception as exc:
            if isinstance(exc, BodyTooLarge) and not response_started:
                await error_response(413, str(exc.detail))(scope, receive, send_wrapper)
                return
            if isinstance(exc, OSError | asyncio.CancelledError) and response_started:
                raise  # the client went away mid-response: nothing left to send
            log.exception("unhandled error on %s %s", method, path)
            if not response_started:
                await error_response(500, "internal server error; the error was logged")(
                    scope, receive, send_wrapper
                )
        finally:
            metrics.requests.labels(endpoint=endpoint, method=method, status=str(status)).inc()

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
            decision = await run_in_threadpool(state.limiter.hit, ip)
            if not decision.allowed:
                state.metrics.rate_limited.inc()
                wait = decision.retry_after_header
                return error_response(
                    429,
                    f"rate limit of {decision.limit} requests per minute reached; "
                    f"retry in {wait} s",
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


def _capped(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return capped


def current_caller(request: Request) -> Caller:
    """The caller the middleware identified (the default tenant on other paths)."""
    found = request.scope.get(CALLER_KEY)
    if isinstance(found, Caller):
        return found
    state: ServeState = request.app.state.serve
    return Caller(tenant=state.settings.tenant, ip=client_ip(request.scope))


CallerDep = Annotated[Caller, Depends(current_caller)]


# --- request helpers (pure) ---------------------------------------------------------------


def clean_question(value: str, field: str, settings: Settings) -> str:
    return clean_field(
        value,
        field,
        min_chars=settings.min_question_chars,
        max_chars=settings.max_question_chars,
    )


def clean_context(value: str | None, settings: Settings) -> str | None:
    if value is None:
        return None
    text = clean_field(value, "context", min_chars=0, max_chars=settings.max_selected_text_chars)
    return text or None


def search_options(
    max_results: int | None,
    mode: str | None,
    filters: dict[str, s.FilterValue] | None,
    tenant: str,
    settings: Settings,
) -> SearchOptions:
    """Retrieval options with the caller's tenant forced into the filters."""
    top_k = None
    if max_results is not None:
        top_k = check_range(max_results, "max_results", low=1, high=settings.max_results_limit)
    merged: Filters = dict(filters or {})
    if len(merged) > settings.max_filters:
        raise RequestProblem(
            f"at most {settings.max_filters} filters are allowed, got {len(merged)}",
            field="filters",
        )
    merged.pop("tenant", None)  # never the user's choice
    try:
        to_sql_predicate(merged)
    except (ValueError, TypeError) as e:
        raise RequestProblem(f"filters: {e}", field="filters") from None
    merged["tenant"] = tenant
    return SearchOptions(mode=cast(Any, mode), top_k=top_k, filters=merged)


def total_tokens(answer: Answer, count: Callable[[str], int]) -> int:
    """Tokens the answer cost: the generator's count when it reports one, else (the
    extractive generator) the context read plus the answer written."""
    reported = answer.usage.get("total_tokens")
    if reported:
        return int(reported)
    return int(answer.usage.get("context_tokens", 0)) + (count(answer.text) if answer.text else 0)


def answer_body(
    answer: Answer, query_id: str, conversation_id: str | None, tokens: int
) -> dict[str, Any]:
    body = answer.to_dict()
    body["metadata"].update(query_id=query_id, conversation_id=conversation_id, total_tokens=tokens)
    return body


def document_out(rec: DocumentRecord, upload: UploadRecord | None) -> dict[str, Any]:
    return {
        "doc_id": rec.doc_id,
        "filename": upload.original_name if upload else Path(rec.source).name,
        "title": rec.title,
        "chapter": rec.chapter,
        "format": rec.format,
        "chunk_count": rec.chunk_count,
        "token_count": rec.token_count,
        "file_hash": rec.file_hash,
        "ingested_at": rec.ingested_at,
        "uploaded": upload is not None,
    }


def _conversation_out(c: Conversation) -> dict[str, Any]:
    return {
        "conversation_id": c.conversation_id,
        "title": c.title,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "messages": c.messages,
    }


# --- the app ----------------------------------------------------------------------------


def create_app(settings: Settings | None = None, *, rag: Ragline | None = None) -> FastAPI:
    """The app over ``settings.index_dir``; ``rag`` shares an engine already built
    (it must work on the same index folder)."""
    settings = settings or Settings()
    owns_engine = rag is None
    if rag is None:
        rag = Ragline(settings)
    elif rag.settings.index_dir.resolve() != settings.index_dir.resolve():
        raise ValueError(
            f"the engine's index {rag.settings.index_dir} is not the app's {settings.index_dir}"
        )
    engine = rag
    state = ServeState(settings, engine)
    warm_task: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        nonlocal warm_task
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.serve_threads
        warm_task = asyncio.create_task(run_in_threadpool(state.warm))
        try:
            yield
        finally:
            if not warm_task.done():
                warm_task.cancel()
            with contextlib.suppress(BaseException):
                await warm_task
            state.close()
            if owns_engine:
                engine.close()

    app = FastAPI(
        title="ragline",
        version="0.1.0",
        summary="Grounded, cited answers over a folder of documents.",
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.serve = state
    app.add_middleware(ServeMiddleware, state=state, fastapi_app=app)
    if settings.cors_allow_origins:
        # Added last, so it is outermost: preflights are answered before the key check.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_allow_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
            expose_headers=["Retry-After"],
        )

    async def ready() -> None:
        """Wait for the engine warm-up; 503 when it failed."""
        if state.ready:
            return
        if warm_task is None:
            raise RequestProblem("the server is starting", status_code=503)
        with contextlib.suppress(Exception):
            await asyncio.shield(warm_task)
        if not state.ready:
            raise RequestProblem(
                f"the index is not available: {state.ready_error or 'starting'}", status_code=503
            )

    caller = current_caller

    # -- errors ------------------------------------------------------------------------

    @app.exception_handler(RequestProblem)
    async def _problem(_r: Request, exc: RequestProblem) -> JSONResponse:
        return error_response(exc.status_code, exc.message, code=exc.code, field=exc.field or None)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        field = ".".join(loc)
        msg = str(first.get("msg", "invalid request"))
        if first.get("type") == "json_invalid":
            return error_response(400, "the request body is not valid JSON", code="invalid_json")
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        return error_response(400, f"{field or 'request'}: {msg}{more}", field=field or None)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_r: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = str(exc.detail) if exc.detail else ERROR_CODES.get(exc.status_code, "error")
        if exc.status_code == 404 and exc.detail == "Not Found":
            message = "no such endpoint"
        return error_response(exc.status_code, message, headers=dict(exc.headers or {}))

    # -- answers -----------------------------------------------------------------------

    async def history_of(
        tenant: str, conversation_id: str | None
    ) -> tuple[str | None, list[dict[str, str]]]:
        if conversation_id is None:
            return None, []
        conv = await run_in_threadpool(state.conversations.get, tenant, conversation_id)
        if conv is None:
            raise RequestProblem(
                f"conversation_id {conversation_id!r}: no such conversation",
                status_code=404,
                field="conversation_id",
            )
        msgs = await run_in_threadpool(
            state.conversations.messages,
            tenant,
            conversation_id,
            engine.settings.history_messages,
        )
        return conv.conversation_id, [{"role": m.role, "content": m.content} for m in msgs]

    async def finish_row(row: Any, status: int, error: str | None, answer: Answer | None) -> None:
        row.status_code = status
        if error:
            row.error = error[:500]
        if answer is not None:
            row.record_answer(answer)
        await run_in_threadpool(state.log_row, row)

    async def remember(
        tenant: str, conversation_id: str, question: str, answer: Answer, query_id: str,
        body: dict[str, Any],
    ) -> str:  # fmt: skip
        """Store the exchange (the user message first) and return the answer's message id."""
        await run_in_threadpool(
            state.conversations.add, tenant, conversation_id, "user", question,
            query_id=query_id,
        )  # fmt: skip
        return await run_in_threadpool(
            lambda: state.conversations.add(
                tenant, conversation_id, "assistant", answer.text, query_id=query_id, answer=body
            )
        )

    def engine_error(exc: Exception) -> RequestProblem:
        if isinstance(exc, RequestProblem):
            return exc
        if isinstance(exc, StoreError):
            log.error("store error: %s", exc)
            return RequestProblem(f"the index is not available: {exc}", status_code=503)
        return RequestProblem(str(exc), field="question")

    @app.post(
        "/api/query",
        response_model=s.QueryResponse,
        responses={**ERROR_RESPONSES, 404: {"model": s.ErrorBody}},
        tags=["answers"],
        summary="Answer a question with citations",
    )
    async def query(body: s.QueryRequest, who: CallerDep) -> dict[str, Any]:
        question = clean_question(body.question, "question", settings)
        context = clean_context(body.context, settings)
        options = search_options(body.max_results, body.mode, body.filters, who.tenant, settings)
        await ready()
        conversation_id, history = await history_of(who.tenant, body.conversation_id)
        query_id = new_query_id()
        row = state.start_row(who, "/api/query", question, query_id)
        run = AnswerRun(state, who.tenant)
        try:
            answer = await run_in_threadpool(run.answer, question, history, context, options)
        except (ValueError, StoreError) as exc:
            problem = engine_error(exc)
            await finish_row(row, problem.status_code, problem.message, None)
            raise problem from None
        except Exception as exc:
            await finish_row(row, 500, f"{type(exc).__name__}: {exc}", None)
            raise
        state.metrics.observe_answer("/api/query", answer)
        tokens = total_tokens(answer, run.answerer.count_tokens)
        out = answer_body(answer, query_id, conversation_id, tokens)
        if conversation_id is not None:
            await remember(who.tenant, conversation_id, question, answer, query_id, out)
        await finish_row(row, 200, None, answer)
        return out

    @app.post(
        "/api/chat",
        response_class=StreamingResponse,
        responses={
            **ERROR_RESPONSES,
            404: {"model": s.ErrorBody},
            200: {
                "description": "Server-sent events: token, citation, done (or error).",
                "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
            },
        },
        tags=["answers"],
        summary="Answer a question as a stream of server-sent events",
    )
    async def chat(body: s.QueryRequest, who: CallerDep) -> StreamingResponse:
        question = clean_question(body.question, "question", settings)
        context = clean_context(body.context, settings)
        options = search_options(body.max_results, body.mode, body.filters, who.tenant, settings)
        await ready()
        conversation_id, history = await history_of(who.tenant, body.conversation_id)
        if conversation_id is None:
            conv = await run_in_threadpool(state.conversations.create, who.tenant, question)
            conversation_id = conv.conversation_id
        query_id = new_query_id()
        row = state.start_row(who, "/api/chat", question, query_id)
        run = AnswerRun(state, who.tenant)
        cid: str = conversation_id
        return StreamingResponse(
            chat_events(run, question, history, context, options, who, cid, query_id, row),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def chat_events(
        run: AnswerRun,
        question: str,
        history: list[dict[str, str]],
        context: str | None,
        options: SearchOptions,
        who: Caller,
        conversation_id: str,
        query_id: str,
        row: Any,
    ) -> AsyncIterator[bytes]:
        started = time.perf_counter()
        answer: Answer | None = None
        status, error = 200, None
        failed = False
        try:
            async for event in iterate_in_thread(
                lambda: run.stream(question, history, context, options)
            ):
                if failed and event.type != "done":
                    continue
                if event.type == "token":
                    yield format_event("token", {"text": event.text})
                elif event.type == "citation" and event.citation is not None:
                    data = event.citation.to_dict()
                    src = run.source(event.citation.number)
                    data["source"] = src.to_dict() if src is not None else None
                    yield format_event("citation", data)
                elif event.type == "error":
                    failed, status, error = True, 502, event.error
                    yield format_event(
                        "error",
                        {"error": "generation_failed", "message": event.error, "status_code": 502},
                    )
                elif event.type == "done" and event.answer is not None:
                    answer = event.answer
                    state.metrics.observe_answer("/api/chat", answer)
                    tokens = total_tokens(answer, run.answerer.count_tokens)
                    body = answer_body(answer, query_id, conversation_id, tokens)
                    message_id = await remember(
                        who.tenant, conversation_id, question, answer, query_id, body
                    )
                    if not failed:
                        yield format_event(
                            "done",
                            {
                                "conversation_id": conversation_id,
                                "message_id": message_id,
                                "query_id": query_id,
                                "answer": body,
                                "total_tokens": tokens,
                                "latency_ms": round((time.perf_counter() - started) * 1000, 3),
                            },
                        )
        except (ValueError, StoreError) as exc:
            problem = engine_error(exc)
            status, error = problem.status_code, problem.message
            yield format_event(
                "error",
                {"error": problem.code, "message": problem.message, "status_code": status},
            )
        except Exception as exc:
            status, error = 500, f"{type(exc).__name__}: {exc}"
            log.exception("chat stream failed")
            yield format_event(
                "error",
                {"error": "internal_error", "message": "internal server error", "status_code": 500},
            )
        except (asyncio.CancelledError, GeneratorExit):
            state.metrics.stream_disconnects.inc()
            status, error = 499, "client disconnected"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await finish_row(row, status, error, answer)

    # -- search ------------------------------------------------------------------------

    @app.post(
        "/api/search",
        response_model=s.SearchResponse,
        responses=ERROR_RESPONSES,
        tags=["search"],
        summary="Ranked chunks for a query (no answer)",
    )
    async def search(body: s.SearchRequest, who: CallerDep) -> dict[str, Any]:
        query_text = clean_question(body.query, "query", settings)
        options = search_options(body.max_results, body.mode, body.filters, who.tenant, settings)
        await ready()
        query_id = new_query_id()
        row = state.start_row(who, "/api/search", query_text, query_id)
        try:
            result = await run_in_threadpool(lambda: engine.search(query_text, **options))
        except (ValueError, StoreError) as exc:
            problem = engine_error(exc)
            await finish_row(row, problem.status_code, problem.message, None)
            raise problem from None
        for stage, ms in result.timings_ms.items():
            state.metrics.stage_seconds.labels(stage=f"search.{stage}").observe(ms / 1000.0)
        row.retrieved_chunk_ids = [h.chunk.id for h in result.hits]
        row.latencies_ms = dict(result.timings_ms)
        await finish_row(row, 200, None, None)
        return {**result.to_dict(), "query_id": query_id}

    # -- documents ---------------------------------------------------------------------

    async def tenant_documents(tenant: str) -> list[DocumentRecord]:
        await ready()
        try:
            return await run_in_threadpool(engine.store.documents, tenant)
        except StoreError as exc:
            raise engine_error(exc) from None

    async def owned_document(doc_id: str, tenant: str) -> DocumentRecord:
        """The tenant's document ``doc_id``; another tenant's is as absent as an unknown one."""
        for rec in await tenant_documents(tenant):
            if rec.doc_id == doc_id:
                return rec
        raise RequestProblem(
            f"doc_id {doc_id!r}: no such document", status_code=404, field="doc_id"
        )

    @app.get(
        "/api/documents", response_model=s.DocumentList, responses=ERROR_RESPONSES,
        tags=["documents"], summary="The caller's documents",
    )  # fmt: skip
    async def list_documents(who: CallerDep) -> dict[str, Any]:
        docs = await tenant_documents(who.tenant)
        uploads = await run_in_threadpool(state.uploads.by_tenant, who.tenant)
        out = [document_out(d, uploads.get(d.doc_id)) for d in docs]
        out.sort(key=lambda d: (d["filename"], d["doc_id"]))
        return {"documents": out, "total": len(out)}

    @app.get(
        "/api/documents/{doc_id}", response_model=s.DocumentOut,
        responses={**ERROR_RESPONSES, 404: {"model": s.ErrorBody}},
        tags=["documents"], summary="One of the caller's documents",
    )  # fmt: skip
    async def get_document(doc_id: str, who: CallerDep) -> dict[str, Any]:
        rec = await owned_document(doc_id, who.tenant)
        uploads = await run_in_threadpool(state.uploads.by_tenant, who.tenant)
        return document_out(rec, uploads.get(doc_id))

    @app.delete(
        "/api/documents/{doc_id}", response_model=s.DeleteResponse,
        responses={**ERROR_RESPONSES, 404: {"model": s.ErrorBody}},
        tags=["documents"], summary="Remove one of the caller's documents from the index",
    )  # fmt: skip
    async def delete_document(doc_id: str, who: CallerDep) -> dict[str, Any]:
        await owned_document(doc_id, who.tenant)

        def remove() -> None:
            with state.write_lock:  # the file too: a re-upload must not find it half-gone
                engine.store.delete_document(doc_id)
                engine.store.optimize()
                state.uploads.forget(who.tenant, doc_id)

        try:
            await run_in_threadpool(remove)
        except StoreError as exc:
            raise engine_error(exc) from None
        return {"doc_id": doc_id, "deleted": True}

    @app.post(
        "/api/documents", response_model=s.UploadResponse,
        responses=ERROR_RESPONSES, tags=["documents"],
        summary="Upload one file and index it for the caller's tenant",
    )  # fmt: skip
    async def upload_document(
        who: CallerDep,
        file: Annotated[UploadFile, File(description="A .md, .txt, .html or .pdf file.")],
    ) -> dict[str, Any]:
        limit = settings.max_upload_bytes
        data = await file.read(limit + 1)
        await file.close()
        if len(data) > limit:
            raise RequestProblem(
                f"the file is larger than {limit:,} bytes (RAGLINE_MAX_UPLOAD_BYTES)",
                status_code=413,
                field="file",
            )
        # Only types the ingest takes too: any other would be stored, skipped by the
        # sync, and reported as an "unchanged" upload with no document.
        ingested = {e.lower() for e in engine.settings.extensions}
        accepted = tuple(e for e in settings.upload_extensions if e.lower() in ingested)
        name = upload_name(file.filename or "", data, who.tenant, accepted)
        check_upload_content(data, name.extension)
        await ready()
        return await run_in_threadpool(ingest_upload, who.tenant, name, data)

    def ingest_upload(tenant: str, name: Any, data: bytes) -> dict[str, Any]:
        folder = state.uploads.folder(tenant)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name.stored
        with state.write_lock:
            if not path.exists():
                tmp = path.with_name(f".{name.stored}.part")
                tmp.write_bytes(data)
                tmp.replace(path)
            # Stored under a content hash; a file without a title of its own is
            # titled by the name the client gave it, not by the hash.
            report = engine.ingest(path, tenant=tenant, title=PurePath(name.original).stem)
            if report.failed:
                if not report.skipped:
                    path.unlink(missing_ok=True)
                reason = report.failed[0]
                line = f" (line {reason.line})" if reason.line else ""
                raise RequestProblem(
                    f"{name.original}{line}: {reason.reason}", field="file", code="ingest_failed"
                )
            doc_id = doc_id_for(tenant, path.resolve().as_posix())
            upload = UploadRecord(doc_id, tenant, name.original, name.stored, len(data), now_iso())
            state.uploads.record(upload)
            docs = {d.doc_id: d for d in engine.store.documents(tenant)}
        rec = docs.get(doc_id)
        return {
            "document": document_out(rec, upload) if rec else None,
            "status": "indexed" if report.indexed else "unchanged",
            "chunks": report.chunks,
            "chunks_embedded": report.chunks_embedded,
            "tokens": report.tokens,
            "seconds": round(report.seconds, 3),
        }

    # -- conversations -----------------------------------------------------------------

    @app.get(
        "/api/conversations", response_model=s.ConversationList, responses=ERROR_RESPONSES,
        tags=["conversations"], summary="The caller's conversations, latest first",
    )  # fmt: skip
    async def list_conversations(who: CallerDep) -> dict[str, Any]:
        convs = await run_in_threadpool(state.conversations.list, who.tenant)
        return {"conversations": [_conversation_out(c) for c in convs]}

    @app.get(
        "/api/conversations/{conversation_id}", response_model=s.ConversationDetail,
        responses={**ERROR_RESPONSES, 404: {"model": s.ErrorBody}},
        tags=["conversations"], summary="A conversation with its messages",
    )  # fmt: skip
    async def get_conversation(conversation_id: str, who: CallerDep) -> dict[str, Any]:
        conv = await run_in_threadpool(state.conversations.get, who.tenant, conversation_id)
        if conv is None:
            raise RequestProblem(
                f"conversation_id {conversation_id!r}: no such conversation",
                status_code=404,
                field="conversation_id",
            )
        msgs = await run_in_threadpool(state.conversations.messages, who.tenant, conversation_id)
        return {
            **_conversation_out(conv),
            "history": [
                {
                    "message_id": m.message_id,
                    "role": m.role,
                    "content": m.content,
                    "created_at": m.created_at,
                    "query_id": m.query_id,
                    "answer": m.answer,
                }
                for m in msgs
            ],
        }

    @app.delete(
        "/api/conversations/{conversation_id}", response_model=s.DeleteResponse,
        responses={**ERROR_RESPONSES, 404: {"model": s.ErrorBody}},
        tags=["conversations"], summary="Delete a conversation",
    )  # fmt: skip
    async def delete_conversation(conversation_id: str, who: CallerDep) -> dict[str, Any]:
        if not await run_in_threadpool(state.conversations.delete, who.tenant, conversation_id):
            raise RequestProblem(
                f"conversation_id {conversation_id!r}: no such conversation",
                status_code=404,
                field="conversation_id",
            )
        return {"doc_id": conversation_id, "deleted": True}

    # -- operations --------------------------------------------------------------------

    @app.get("/healthz", response_model=s.HealthResponse, tags=["operations"])
    async def healthz() -> dict[str, str]:
        """The process answers (liveness)."""
        return {"status": "ok"}

    @app.get(
        "/readyz",
        response_model=s.ReadyResponse,
        responses={503: {"model": s.ReadyResponse}},
        tags=["operations"],
    )
    async def readyz() -> JSONResponse:
        """The index is open and the model loaded (readiness)."""
        if state.ready:
            try:
                await run_in_threadpool(engine.store.count_chunks, None)
            except Exception as exc:
                return JSONResponse(
                    {"status": "unavailable", "store": False, "model": True, "detail": str(exc)},
                    status_code=503,
                )
            return JSONResponse({"status": "ready", "store": True, "model": True, "detail": ""})
        return JSONResponse(
            {
                "status": "starting" if not state.ready_error else "unavailable",
                "store": False,
                "model": False,
                "detail": state.ready_error,
            },
            status_code=503,
        )

    @app.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}}}},
        tags=["operations"],
    )
    async def metrics() -> Response:
        """Prometheus text exposition."""
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)

    from ragline.serve.openai_compat import add_openai_routes

    add_openai_routes(app, state, ready, caller, finish_row)

    from ragline.mcp.http import mount_mcp

    mount_mcp(app, state)  # MCP tools at /mcp (streamable HTTP), same tenants and keys

    # -- web UI ------------------------------------------------------------------------

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        page = STATIC_DIR / "index.html"
        if not page.is_file():
            return error_response(404, "the web UI is not installed")
        return FileResponse(page, media_type="text/html")

    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    install_openapi(app, settings)
    return app


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """The OpenAPI document with the configured limits and without FastAPI's 422s
    (validation errors are 400s with the error body)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title, version=app.version, summary=app.summary, routes=app.routes
        )
        for path_item in doc.get("paths", {}).values():
            for op in path_item.values():
                if isinstance(op, dict):
                    op.get("responses", {}).pop("422", None)
        schemas = doc.get("components", {}).get("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        q_limits = {
            "minLength": settings.min_question_chars,
            "maxLength": settings.max_question_chars,
        }
        for model, fields in {
            "QueryRequest": {"question": q_limits},
            "SearchRequest": {"query": q_limits},
        }.items():
            props = schemas.get(model, {}).get("properties", {})
            for field, limits in fields.items():
                props.get(field, {}).update(limits)
        for model in ("QueryRequest", "SearchRequest"):
            props = schemas.get(model, {}).get("properties", {})
            _limit_optional(
                props.get("max_results"), {"minimum": 1, "maximum": settings.max_results_limit}
            )
            _limit_optional(props.get("filters"), {"maxProperties": settings.max_filters})
        _limit_optional(
            schemas.get("QueryRequest", {}).get("properties", {}).get("context"),
            {"maxLength": settings.max_selected_text_chars},
        )
        app.openapi_schema = doc
        return doc

    app.openapi = build  # type: ignore[method-assign]


def _limit_optional(prop: dict[str, Any] | None, limits: dict[str, Any]) -> None:
    """Put ``limits`` on the non-null branch of an optional field's schema."""
    if not prop:
        return
    for branch in prop.get("anyOf", [prop]):
        if branch.get("type") != "null":
            branch.update(limits)
