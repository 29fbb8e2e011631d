"""The one error shape of the API, ``{"error", "message", "status_code"[, "field"]}``,
and the exception handlers that give it to every error (FastAPI's 422 becomes a 400
naming the field; no body ever carries a traceback or an internal message)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ragline.serve import schemas as s
from ragline.serve.routing import flat_routes
from ragline.serve.state import log
from ragline.store.base import StoreError
from ragline.validation import RequestProblem

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
#: The error responses of a route that looks something up by id.
LOOKUP_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    404: {"model": s.ErrorBody, "description": "not found"},
}


#: The 503 body's message while the index cannot answer (details go to the log).
UNAVAILABLE = "the index is not available right now; try again shortly"


def encodable(text: str) -> str:
    """``text`` with any lone surrogate written as ``\\udXXX``: a message quoting the
    client's input must not turn a 400 into a 500 when the body is encoded."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(
    status: int,
    message: str,
    *,
    code: str = "",
    field: str | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    """The one error shape of the API (``extra`` adds fields, e.g. ``retry_after``)."""
    body: dict[str, Any] = {
        "error": code or ERROR_CODES.get(status, "error"),
        "message": encodable(message),
        "status_code": status,
    }
    if field:
        body["field"] = encodable(field)
    if extra:
        body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers)


def engine_error(exc: Exception, field: str = "question") -> RequestProblem:
    """The response for an error the engine raised: a store fault is a 503, anything
    else (a ValueError about the question) a 400."""
    if isinstance(exc, RequestProblem):
        return exc
    if isinstance(exc, StoreError):
        # The store's message can hold SQL, paths and tenant names: the log gets it,
        # the client a message of its own.
        log.error("store error: %s", exc)
        return RequestProblem(UNAVAILABLE, status_code=503)
    return RequestProblem(str(exc), field=field)


async def _problem(_r: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestProblem)
    return error_response(exc.status_code, exc.message, code=exc.code, field=exc.field or None)


async def _invalid(_r: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path")]
    field = ".".join(loc)
    msg = str(first.get("msg", "invalid request"))
    if first.get("type") == "json_invalid":
        return error_response(400, "the request body is not valid JSON", code="invalid_json")
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return error_response(400, f"{field or 'request'}: {msg}{more}", field=field or None)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route takes at this path (Starlette's 405 names only the
    first route's, so ``GET`` + ``POST /api/documents`` said ``Allow: GET``)."""
    methods: set[str] = set()
    for route in flat_routes(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match in (Match.FULL, Match.PARTIAL):
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = str(exc.detail) if exc.detail else ERROR_CODES.get(exc.status_code, "error")
    if exc.status_code == 404 and exc.detail == "Not Found":
        message = "no such endpoint"
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
        message = f"{request.method} is not allowed here; allowed: {headers['Allow']}"
    return error_response(exc.status_code, message, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestProblem, _problem)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(StarletteHTTPException, _http)
