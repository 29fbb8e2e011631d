"""The HTTP service: ``create_app(settings)`` assembles the FastAPI app `ragline serve`
runs; each part lives in its own module.

Layers, outside in:

1. :class:`~ragline.serve.middleware.ServeMiddleware` (pure ASGI): request metrics,
   the body size cap (413), the per-IP rate limit (429), API key → tenant (401), and a
   last-resort 500 that never leaks a traceback;
2. the exception handlers of :mod:`ragline.serve.errors`, which give every error one
   JSON shape, ``{"error", "message", "status_code"}``;
3. the routers of :mod:`ragline.serve.routes` (answers, search, documents,
   conversations, operations, OpenAI-compatible), which clean and check their input,
   force the caller's tenant into every filter, and run the blocking engine in worker
   threads (:mod:`ragline.serve.state` says what is shared and how it is guarded;
   :mod:`ragline.serve.deps` holds the dependencies they share).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from ragline import tracing
from ragline.engine import Ragline
from ragline.serve.errors import install_error_handlers
from ragline.serve.mcp import mount_mcp
from ragline.serve.middleware import ServeMiddleware
from ragline.serve.openapi import install_openapi
from ragline.serve.routes import answers, conversations, documents, feedback, ops, search
from ragline.serve.routes import openai as openai_routes
from ragline.serve.routes.ops import STATIC_DIR
from ragline.serve.state import ServeState
from ragline.settings import Settings


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

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.serve_threads
        traced = tracing.configure_from_env()  # off unless OTEL_* variables ask
        state.warm_started = time.monotonic()
        warm_task = asyncio.create_task(run_in_threadpool(state.warm))
        state.warm_task = warm_task
        try:
            yield
        finally:
            for task in {warm_task, state.warm_task}:  # the first, and any retry
                if task is None:
                    continue
                if not task.done():
                    task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            state.close()
            if owns_engine:
                engine.close()
            if traced:
                tracing.shutdown()

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
    install_error_handlers(app)
    for module in (answers, search, documents, conversations, feedback, ops, openai_routes):
        app.include_router(module.router)
    mount_mcp(app, state)  # MCP tools at /mcp (streamable HTTP), same tenants and keys
    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    install_openapi(app, settings)
    return app
