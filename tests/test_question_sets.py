"""The translated question sets of benchmarks/data: each question asked in every
language of its set, about one target page, ids unique. A target asked in three
languages of four would make the per-language figures incomparable."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
SETS = {
    "languages_questions.jsonl": ["en", "es", "fr", "ja", "zh-hans"],
    "debref_questions.jsonl": ["en", "de", "es", "fr", "pt"],
}


def problems(rows: list[dict[str, str]], langs: list[str]) -> list[str]:
    out: list[str] = []
    ids = [r["id"] for r in rows]
    out += [f"id {i!r} twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    asked: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r["lang"] not in langs:
            out.append(f"{r['id']}: language {r['lang']!r} not in {langs}")
        if not r["question"].strip():
            out.append(f"{r['id']}: empty question")
        asked[r["target"]].add(r["lang"])
    out += [
        f"target {t!r} is not asked in {sorted(set(langs) - got)}"
        for t, got in sorted(asked.items())
        if got != set(langs)
    ]
    return out


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_target_is_asked_in_every_language(name: str) -> None:
    rows = [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]
    assert rows and problems(rows, SETS[name]) == []


def test_debref_targets_are_section_numbers() -> None:
    """benchmarks/debref_beir.py keys pages by section number ("3.8.1", "A.1")."""
    rows = (DATA / "debref_questions.jsonl").read_text(encoding="utf-8").splitlines()
    bad = [
        r for r in map(json.loads, rows) if not re.fullmatch(r"(\d+|[A-Z])(\.\d+)+", r["target"])
    ]
    assert bad == []


def test_a_target_missing_a_language_is_named() -> None:
    rows = [
        {"id": "a-en", "lang": "en", "target": "p", "question": "Q?"},
        {"id": "a-de", "lang": "de", "target": "p", "question": "F?"},
        {"id": "a-de", "lang": "de", "target": "q", "question": "F?"},
    ]
    found = problems(rows, ["en", "de"])
    assert "id 'a-de' twice" in found and "target 'q' is not asked in ['en']" in found
