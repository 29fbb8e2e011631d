"""RAGLINE_LOG_FORMAT=json: ragline's log lines as one JSON object each."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from ragline import logs
from ragline.settings import Settings


@pytest.fixture
def ragline_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("ragline")
    handlers, propagate = list(logger.handlers), logger.propagate
    yield logger
    logger.handlers[:] = handlers
    logger.propagate = propagate


def test_json_lines_with_fields_and_tracebacks(
    ragline_logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(Settings(log_format="json").log_format)
    logs.configure("json")  # twice: still one handler
    log = logging.getLogger("ragline.serve")
    log.warning("store unavailable (%s); answering from %d cached chunks", "timeout", 3)
    log.warning("slow answer", extra={"query_id": "abc", "ms": 12.5})
    try:
        raise ValueError("bad row")
    except ValueError:
        log.exception("write failed: ünïcode")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert first["level"] == "WARNING" and first["logger"] == "ragline.serve"
    assert first["message"] == "store unavailable (timeout); answering from 3 cached chunks"
    assert first["time"].endswith("+00:00")
    assert second["query_id"] == "abc" and second["ms"] == 12.5
    assert third["level"] == "ERROR" and third["message"] == "write failed: ünïcode"
    assert "ValueError: bad row" in third["exception"]


def test_text_is_the_default_and_changes_nothing(ragline_logger: logging.Logger) -> None:
    assert Settings().log_format == "text"
    before = list(ragline_logger.handlers)
    logs.configure("text")
    assert ragline_logger.handlers == before and logs.uvicorn_log_config("text") is None


def test_a_bad_format_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="log_format"):
        Settings()
