"""docs/integrations.md: each example runs as written (in a copy of a docs folder)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "integrations.md"


def examples() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_page_has_one_example_per_framework() -> None:
    found = examples()
    assert len(found) == 2
    assert "integrations.langchain" in found[0] and "integrations.llamaindex" in found[1]


@pytest.mark.parametrize("number", [0, 1], ids=["langchain", "llamaindex"])
def test_each_example_runs(
    number: int,
    tides: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As a user would: ``docs`` in the working folder, the default index folder there."""
    shutil.copytree(tides, tmp_path / "docs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGLINE_INDEX_DIR", raising=False)
    exec(compile(examples()[number], f"{PAGE}#example-{number + 1}", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert (tmp_path / ".ragline").is_dir()
    scores = [line for line in printed if re.match(r"^\d+\.\d+ \S.* > ", line)]
    assert len(scores) == 4, printed
    # the framework's (fake) model answered with its prompt: the retrieved context
    assert printed[len(scores)].startswith("Context")
