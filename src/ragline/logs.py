"""Log lines as JSON (``RAGLINE_LOG_FORMAT=json``): one object per line, for log
collectors that parse fields rather than text. The default, ``text``, leaves logging
as Python and uvicorn set it up."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

#: The attributes every LogRecord has; anything else was passed as ``extra=`` and is
#: kept as a field of its own.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """A record as one JSON object: time (UTC, ISO 8601), level, logger, message,
    the exception's traceback when there is one, and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure(log_format: str) -> None:
    """With ``json``, ragline's loggers write JSON lines to stderr (their records no
    longer reach the root logger's text handlers, so nothing is written twice); with
    ``text``, nothing changes. Calling it again does not add a second handler."""
    if log_format != "json":
        return
    logger = logging.getLogger("ragline")
    if any(isinstance(h.formatter, JsonFormatter) for h in logger.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False


def uvicorn_log_config(log_format: str) -> dict[str, Any] | None:
    """uvicorn's ``log_config`` for ``ragline serve``: its access and error lines as
    JSON too (None: uvicorn's own text format)."""
    if log_format != "json":
        return None
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "ragline.logs.JsonFormatter"}},
        "handlers": {"json": handler},
        "loggers": {
            "uvicorn": {"handlers": ["json"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["json"], "level": "INFO", "propagate": False},
            "ragline": {"handlers": ["json"], "propagate": False},
        },
    }
