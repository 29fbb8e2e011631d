"""fit_table and pairs_table: the layout changes with the width, figures never get cut."""

from __future__ import annotations

import io

import pytest
from rich.console import Console, RenderableType

from ragline.tables import fit_table, fit_tail, needed_width, pairs_table

HEADERS = ["mode", "nDCG@10", "MRR@10", "recall@100", "p50 ms", "p95 ms", "p99 ms"]
ROWS = [
    ["bm25", "0.6512", "0.6023", "0.9133", "12.3", "45.6", "1,234.5"],
    ["vector", "0.6401", "0.5987", "0.9420", "8.1", "19.2", "31.7"],
    ["hybrid (default)", "0.6931", "0.6544", "0.9511", "20.4", "61.0", "99.9"],
]


def render(renderable: RenderableType, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None).print(renderable)
    return buffer.getvalue()


def assert_whole(text: str, width: int) -> None:
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= width, text
    tokens = set(text.replace("│", " ").replace("┃", " ").split())
    for row in ROWS:
        for figure in row[1:]:
            assert figure in tokens, (figure, text)


@pytest.mark.parametrize("width", [120, 80, 60, 40, 30])
def test_every_figure_is_printed_whole(width: int) -> None:
    assert_whole(render(fit_table("retrieval", HEADERS, ROWS, width), width), width)


def test_the_layout_follows_the_width() -> None:
    wide = render(fit_table(None, HEADERS, ROWS, 120), 120)
    assert wide.splitlines()[1].split("┃")[1].strip() == "mode"  # one row per mode
    turned = render(fit_table(None, HEADERS, ROWS, 60), 60)
    assert "bm25" in turned.splitlines()[1] and "vector" in turned.splitlines()[1]
    assert any(line.startswith("│ nDCG@10") for line in turned.splitlines())
    stacked = render(fit_table("t", HEADERS, ROWS, 30), 30)
    assert stacked.count("nDCG@10") == 3  # one small table per mode


def test_needed_width_counts_borders_and_padding() -> None:
    # columns of 4 and 6 cells: 4 + 6 + 3 per column + 1
    assert needed_width(["a", "b"], [["abcd", "123456"]]) == 4 + 6 + 3 * 2 + 1
    # the first column and its header may wrap at spaces; figures and their headers not
    assert needed_width(["a long label", "x"], [["two words", "1,234"]]) == 5 + 5 + 7
    assert needed_width(["m", "n"], [["x", "[bold]0.5[/]"]]) == 1 + 3 + 7  # markup not counted


# ragline bench's third table: headers longer than their figures.
BUILD_HEADERS = ["chunks", "write s", "optimize s", "vector index", "peak RSS build"]
BUILD_HEADERS += ["peak RSS search", "on disk"]
BUILD_ROWS = [
    ["500", "0.2", "0.1", "none", "597 MiB", "602 MiB", "0.9 MiB"],
    ["100,000", "12.3", "4.1", "IVF_PQ", "1,597 MiB", "1,602 MiB", "120.9 MiB"],
]


@pytest.mark.parametrize("width", [120, 80, 60])
def test_long_headers_keep_every_column(width: int) -> None:
    """A table whose headers are wider than their figures: counted by their longest
    word, it passed for fitting at 80 columns, and rich cut its first column to
    nothing and its last off the edge."""
    text = render(fit_table("index build", BUILD_HEADERS, BUILD_ROWS, width), width)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width, text
    lines = [
        " ".join(line.replace("│", " ").replace("┃", " ").split()) for line in text.splitlines()
    ]
    flat = " ".join(lines)
    for header in BUILD_HEADERS:
        assert header in flat, (header, text)  # each header on one line
    for row in BUILD_ROWS:
        for cell in row:
            assert cell in flat, (cell, text)


def test_pairs_table_keeps_values_whole_and_wraps_labels() -> None:
    text = render(pairs_table(None, [("tokens written by this run", "23,663")]), 24)
    assert "23,663" in text and "…" not in text


def test_fit_tail_keeps_the_file_name() -> None:
    path = "chapter_attention/self-attention.md"
    assert fit_tail(path, 80) == path
    assert fit_tail(path, 12) == "…ttention.md"
    assert fit_tail(path, 7) == ""  # too little room for a useful name
