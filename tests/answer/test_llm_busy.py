"""`ragline ask` when the language model answers 429 forever: after the retries, the
extractive answer with a notice, exit status 0 (a real index of docs/, a real
scripted OpenAI-compatible endpoint on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ragline.cli import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_ask_with_the_llm_rate_limited_forever(
    tmp_path: Path, llm_server: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, llm = llm_server
    llm.script = [("status", 429, {"retry-after": "0"}, "rate limited")] * 10
    index = tmp_path / "index"
    done = runner.invoke(app, ["ingest", str(REPO / "docs"), "--index", str(index), "--json"])
    assert done.exit_code == 0, done.output
    monkeypatch.setenv("LLM_BASE_URL", url)
    monkeypatch.setenv("LLM_MODEL", "scripted")
    monkeypatch.setenv("LLM_MAX_RETRIES", "2")
    question = "What does the section chunker do with tables?"
    args = ["ask", question, "--index", str(index), "--generator", "openai"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "The language model is busy" in result.stdout and "[1]" in result.stdout
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["answer"].startswith("The language model is busy") and payload["citations"]
    assert payload["metadata"]["complete"] is True and "429" in payload["metadata"]["error"]
    assert len(llm.requests) == 6  # 2 asks × (1 try + 2 retries)
