"""First-token latency and per-stage latency histograms on /metrics, and `ragline stats`
reading the same from the query log (a real server, a real log file)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.latency import quantiles, stage_quantiles

from .conftest import LiveServer, metric_value, sse_events

QUESTIONS = [
    "What does the section chunker do with tables?",
    "How do I filter search results by chapter?",
    "What is reciprocal rank fusion?",
]


def test_quantiles_are_numpy_linear() -> None:
    assert quantiles([]) == {}
    q = quantiles([float(i) for i in range(1, 101)])
    assert q == {"p50": 50.5, "p95": 95.05, "p99": 99.01}
    per = stage_quantiles([{"total": 10.0, "generate": 1.0}, {"total": 30.0}])
    assert per["total"]["p50"] == 20.0 and per["generate"] == {"p50": 1.0, "p95": 1.0, "p99": 1.0}


def test_metrics_and_stats_from_the_query_log(
    tmp_path: Path,
    docs_index: Path,
    serve: Callable[..., LiveServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "querylog.sqlite3"
    live = serve(docs_index, rate_limit_per_minute=0, query_log_url=str(db), query_log_salt="s")
    with live.client() as c:
        for q in QUESTIONS:
            assert c.post("/api/query", json={"question": q}).status_code == 200
        with c.stream("POST", "/api/chat", json={"question": QUESTIONS[0]}) as r:
            assert sse_events("".join(r.iter_text()))[-1][0] == "done"
        assert c.post("/api/query", json={"question": "a"}).status_code == 400
        text = c.get("/metrics").text
    count = "ragline_llm_first_token_seconds_count"
    assert metric_value(text, count, endpoint="/api/query") == 3
    assert metric_value(text, count, endpoint="/api/chat") == 1
    # p50/p95/p99 come from the histograms (histogram_quantile), in seconds
    assert metric_value(text, "ragline_stage_seconds_count", stage="total") == 4
    assert metric_value(text, "ragline_stage_seconds_sum", stage="first_token") > 0
    inf = metric_value(text, "ragline_stage_seconds_bucket", stage="first_token", le="+Inf")
    assert inf == 4
    assert "ragline_stage_latency_ms" not in text  # a gauge in ms with a quantile label

    time.sleep(0.5)  # the 400's row is written just after its response
    monkeypatch.setenv("RAGLINE_QUERY_LOG_URL", str(db))
    result = CliRunner().invoke(app, ["stats", "--index", str(docs_index), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["requests"] == 5
    assert summary["by_status"] == {"success": 4, "error": 1}
    first = summary["stages_ms"]["first_token"]
    total = summary["stages_ms"]["total"]
    assert 0 < first["p50"] <= first["p95"] <= first["p99"] and total["p99"] >= first["p50"]
    assert summary["total_tokens"] > 0
    table = CliRunner().invoke(app, ["stats", "--index", str(docs_index)], env={"COLUMNS": "160"})
    assert table.exit_code == 0 and "first_token" in table.stdout and "p95" in table.stdout
    for columns in (80, 60):  # every line fits; the statuses as words, not a dict
        narrow = CliRunner().invoke(
            app, ["stats", "--index", str(docs_index)], env={"COLUMNS": str(columns)}
        )
        assert narrow.exit_code == 0, narrow.output
        lines = narrow.stdout.splitlines()
        assert max(map(len, lines)) <= columns, narrow.stdout
        flat = " ".join(narrow.stdout.split())
        assert "{" not in flat and "status success 4, error 1;" in flat, narrow.stdout
