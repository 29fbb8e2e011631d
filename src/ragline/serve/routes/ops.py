"""Operations: liveness (``/healthz``), readiness (``/readyz``), Prometheus
``/metrics``, and the web UI page at ``/``."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from ragline.serve import schemas as s
from ragline.serve.deps import StateDep, ensure_warming
from ragline.serve.errors import error_response
from ragline.serve.metrics import CONTENT_TYPE
from ragline.serve.state import log

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=s.HealthResponse)
async def healthz() -> dict[str, str]:
    """The process answers (liveness)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=s.ReadyResponse, responses={503: {"model": s.ReadyResponse}})
async def readyz(state: StateDep) -> JSONResponse:
    """The index is open and the model loaded (readiness). While it is not, the
    warm-up is tried again every ``warm_retry_s``, so readiness comes back by itself."""
    ensure_warming(state)
    if state.ready:
        try:
            await run_in_threadpool(state.rag.store.info, None)
        except Exception as exc:
            log.warning("readiness: the store does not answer: %s", exc)
            return JSONResponse(
                {"status": "unavailable", "store": False, "model": True,
                 "detail": f"the store does not answer ({type(exc).__name__})"},
                status_code=503,
            )  # fmt: skip
        return JSONResponse({"status": "ready", "store": True, "model": True, "detail": ""})
    return JSONResponse(
        {
            "status": "starting" if not state.ready_error else "unavailable",
            "store": False,
            "model": False,
            # the class of the error only: its message can hold paths and SQL (logged)
            "detail": state.ready_error.split(":", 1)[0],
        },
        status_code=503,
    )


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}}}},
)
async def metrics(state: StateDep) -> Response:
    """Prometheus text exposition."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/", include_in_schema=False)
async def index() -> Response:
    page = STATIC_DIR / "index.html"
    if not page.is_file():
        return error_response(404, "the web UI is not installed")
    return FileResponse(page, media_type="text/html")
