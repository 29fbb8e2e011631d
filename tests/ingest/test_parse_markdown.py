"""Markdown parsing: spans, heading paths, block kinds, front matter; the tests'
own tide corpus (tests/fixtures/tides) and, with the evaluation data, d2l-en."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.markdown import heading_anchor, heading_title, parse_markdown
from ragline.ingest.records import build_chunks
from ragline.types import BlockKind, ChunkDraft, ParsedDocument

SELF_ATTENTION = (
    "chapter_attention-mechanisms-and-transformers/self-attention-and-positional-encoding.md"
)


def check_spans(doc: ParsedDocument) -> None:
    """Blocks are ordered, disjoint, trimmed, and only whitespace lies between them."""
    body = doc.body
    prev_end = 0
    for b in doc.blocks:
        assert prev_end <= b.start < b.end <= len(body), (doc.source, b)
        text = body[b.start : b.end]
        assert text.strip() and not text[-1].isspace(), (doc.source, b)
        assert not body[prev_end : b.start].strip(), (doc.source, body[prev_end : b.start][:60])
        prev_end = b.end
    assert not body[prev_end:].strip(), (doc.source, body[prev_end:][:60])


def kinds(doc: ParsedDocument) -> list[BlockKind]:
    return [b.kind for b in doc.blocks]


def texts(doc: ParsedDocument) -> list[str]:
    return [doc.body[b.start : b.end] for b in doc.blocks]


def test_block_kinds_and_exact_spans() -> None:
    src = (
        "# Title\n\n"
        "Intro with $x^2$ inline.\n\n"
        "```python\nprint(1)\n```\n\n"
        "~~~\nraw\n~~~\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "- one\n- two\n\n"
        "1. first\n2. second\n\n"
        "$$\nE = mc^2\n$$\n\n"
        "> quoted\n\n"
        "<div>html</div>\n\n"
        "---\n\n"
        "    indented code\n"
    )
    doc = parse_markdown(src, "docs/a.md")
    assert kinds(doc) == [
        BlockKind.HEADING,
        BlockKind.PARAGRAPH,
        BlockKind.CODE,
        BlockKind.CODE,
        BlockKind.TABLE,
        BlockKind.LIST,
        BlockKind.LIST,
        BlockKind.MATH,
        BlockKind.QUOTE,
        BlockKind.PARAGRAPH,  # HTML is rendered to its text (ingest/parse/markup.py)
        BlockKind.RULE,
        BlockKind.CODE,
    ]
    assert texts(doc)[2] == "```python\nprint(1)\n```"
    assert texts(doc)[4] == "| a | b |\n|---|---|\n| 1 | 2 |"
    assert texts(doc)[7] == "$$\nE = mc^2\n$$"
    assert texts(doc)[9] == "html"
    assert texts(doc)[11] == "    indented code"
    # no front matter: the body is the file, its HTML tags rendered to text
    assert doc.body == src.replace("<div>html</div>", "html")
    check_spans(doc)


def test_heading_path_h1_to_h4_and_h5_is_content() -> None:
    src = (
        "# A\n\ntext a\n\n## B\n\ntext b\n\n### C\n\n#### D\n\n##### E\n\ntext e\n\n"
        "## F\n\ntext f\n\n# G\n"
    )
    doc = parse_markdown(src, "x.md")
    paths = {doc.body[b.start : b.end]: b.heading_path for b in doc.blocks}
    assert paths["# A"] == ("A",)
    assert paths["text b"] == ("A", "B")
    assert paths["#### D"] == ("A", "B", "C", "D")
    assert paths["##### E"] == ("A", "B", "C", "D")  # H5 is not a path entry
    assert paths["text e"] == ("A", "B", "C", "D")
    assert paths["text f"] == ("A", "F")  # a new H2 pops H3/H4
    assert paths["# G"] == ("G",)
    levels = [b.level for b in doc.blocks if b.kind is BlockKind.HEADING]
    assert levels == [1, 2, 3, 4, 5, 2, 1]


def test_heading_titles_lose_anchors_and_markup() -> None:
    assert heading_title("Intro {#sec-intro}") == "Intro"
    assert heading_title("The *`emph`* and [link](http://x) **bold**") == "The emph and link bold"
    assert heading_title("[**Training**] and Prediction") == "Training and Prediction"
    doc = parse_markdown("## Setext `code`\n\nx\n\nTitle two\n=========\n", "t.md")
    assert [b.heading_path for b in doc.blocks] == [
        ("Setext code",),
        ("Setext code",),
        ("Title two",),
    ]


def test_title_from_front_matter_then_h1_then_stem() -> None:
    assert parse_markdown("---\ntitle: From FM\n---\n# H1\n", "a/b.md").title == "From FM"
    assert parse_markdown("## Sub\n\n# Real *Title*\n", "a/b.md").title == "Real Title"
    assert parse_markdown("just text\n", "a/notes.md").title == "notes"


def test_front_matter_is_metadata_and_out_of_the_body() -> None:
    src = "---\ntitle: T\ntags: [a, b]\ndate: 2024-05-01\n---\n# Head\n\nBody text.\n"
    doc = parse_markdown(src, "fm.md")
    assert doc.metadata == {"title": "T", "tags": ["a", "b"], "date": "2024-05-01"}
    assert doc.body == "# Head\n\nBody text.\n"
    assert texts(doc) == ["# Head", "Body text."]
    # Block.line counts lines of the original file, front matter included.
    assert [b.line for b in doc.blocks] == [6, 8]
    check_spans(doc)


def test_front_matter_timestamps_are_stored_in_utc() -> None:
    """Metadata filters compare timestamps as text: one zone makes text order time order."""
    src = (
        "---\nat: 2024-05-01T12:30:00+02:00\nnaive: 2024-05-01 08:00:00\nday: 2024-05-01\n---\nx\n"
    )
    doc = parse_markdown(src, "fm.md")
    assert doc.metadata == {
        "at": "2024-05-01T10:30:00+00:00",
        "naive": "2024-05-01T08:00:00+00:00",
        "day": "2024-05-01",
    }


def test_broken_front_matter_names_file_and_line() -> None:
    src = "---\ntitle: ok\nbad: [unclosed\nother: 1\n---\ntext\n"
    with pytest.raises(IngestError) as info:
        parse_markdown(src, "docs/a.md")
    err = info.value
    assert err.source == "docs/a.md"
    assert err.line is not None and 3 <= err.line <= 5
    assert str(err).startswith(f"docs/a.md:{err.line}: broken front matter")


def test_front_matter_must_be_a_mapping() -> None:
    with pytest.raises(IngestError, match="must be a YAML mapping") as info:
        parse_markdown("---\n- a\n- b\n---\ntext\n", "docs/list.md")
    assert info.value.line == 1


def test_display_math_interrupts_paragraph_and_keeps_eqlabel() -> None:
    src = (
        "We define the return\n"
        "$$V(s) = E[R],$$\n"
        ":eqlabel:`eq_value`\n"
        "\n"
        "where $R$ is the return.\n"
        "$$a = b$$\n"
        ":eqlabel:`eq_two`\n"
        "and then more text.\n"
    )
    doc = parse_markdown(src, "m.md")
    assert kinds(doc) == [
        BlockKind.PARAGRAPH,
        BlockKind.MATH,
        BlockKind.PARAGRAPH,
        BlockKind.MATH,
        BlockKind.PARAGRAPH,
    ]
    assert texts(doc)[1] == "$$V(s) = E[R],$$\n:eqlabel:`eq_value`"
    assert texts(doc)[3] == "$$a = b$$\n:eqlabel:`eq_two`"
    assert texts(doc)[4] == "and then more text."
    assert [b.line for b in doc.blocks] == [1, 2, 5, 6, 8]
    check_spans(doc)


def test_d2l_label_lines_stay_with_their_heading() -> None:
    doc = parse_markdown("# Attention\n:label:`sec_attention`\n\nText.\n", "d.md")
    assert texts(doc) == ["# Attention\n:label:`sec_attention`", "Text."]
    assert doc.blocks[0].heading_path == ("Attention",)


def test_text_without_tokens_is_still_a_block() -> None:
    src = "# T\n\n[ref]: https://example.com\n\nSee [the site][ref].\n"
    doc = parse_markdown(src, "r.md")
    assert "[ref]: https://example.com" in texts(doc)
    check_spans(doc)


def test_windows_newlines_are_normalised() -> None:
    doc = parse_markdown("# T\r\n\r\ntext\r\nmore\r\n", "w.md")
    assert doc.body == "# T\n\ntext\nmore\n"
    assert texts(doc) == ["# T", "text\nmore"]


def test_d2l_fence_style_is_code() -> None:
    src = "```{.python .input}\n%%tab pytorch\nimport torch\n```\n\n# Title\n"
    doc = parse_markdown(src, "d2l.md")
    assert kinds(doc) == [BlockKind.CODE, BlockKind.HEADING]
    assert doc.blocks[0].heading_path == ()
    assert doc.title == "Title"


def check_corpus(files: list[Path]) -> tuple[int, int, int]:
    """Parse every file with exact spans; counts of code, maths and table blocks."""
    n_code = n_math = n_tables = 0
    for path in files:
        doc = parse_markdown(path.read_text(encoding="utf-8"), str(path))
        check_spans(doc)
        assert doc.title
        for b in doc.blocks:
            text = doc.body[b.start : b.end]
            if b.kind is BlockKind.CODE:
                n_code += 1
                assert text.startswith(("```", "~~~", "    ")), (path, b.line)
            elif b.kind is BlockKind.MATH:
                n_math += 1
                assert text.startswith(("$$", "\\begin")), (path, b.line)
            elif b.kind is BlockKind.TABLE:
                n_tables += 1
            elif b.kind is BlockKind.HEADING:
                assert b.heading_path or b.level > 4
    return n_code, n_math, n_tables


def test_every_tide_file_parses_with_exact_spans(tides: Path) -> None:
    files = sorted(tides.glob("*.md"))
    assert len(files) == 6
    n_code, n_math, n_tables = check_corpus(files)
    assert (n_code, n_math, n_tables) == (6, 3, 4)  # counted by hand


def test_tide_harmonics_structure(tides: Path) -> None:
    path = tides / "harmonics.md"
    doc = parse_markdown(path.read_text(encoding="utf-8"), str(path))
    assert doc.title == "Harmonic Constituents"
    headings = [b.heading_path for b in doc.blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Harmonic Constituents",),
        ("Harmonic Constituents", "The harmonic model"),
        ("Harmonic Constituents", "The harmonic model", "Fitting the amplitudes"),
        ("Harmonic Constituents", "The main constituents"),
        ("Harmonic Constituents", "The main constituents", "Shallow-water constituents"),
    ]
    maths = [doc.body[b.start : b.end] for b in doc.blocks if b.kind is BlockKind.MATH]
    assert len(maths) == 2 and all(m.startswith("$$\n") and m.endswith("\n$$") for m in maths)
    table = next(b for b in doc.blocks if b.kind is BlockKind.TABLE)
    assert table.heading_path == ("Harmonic Constituents", "The main constituents")
    assert doc.body[table.start : table.end].count("\n") == 6  # header, rule, 5 rows


def test_tide_front_matter_title(tides: Path) -> None:
    doc = parse_markdown((tides / "index.md").read_text(encoding="utf-8"), "index.md")
    assert doc.title == "Tide Prediction Field Guide"
    assert doc.metadata["tags"] == ["tides", "oceanography"]


@pytest.fixture(scope="module")
def d2l_files(d2l: Path) -> list[Path]:
    return sorted(d2l.rglob("*.md"))


def test_d2l_corpus_is_present(d2l_files: list[Path]) -> None:
    assert len(d2l_files) == 192


def test_every_d2l_file_parses_with_exact_spans(d2l_files: list[Path]) -> None:
    n_code, n_math, n_tables = check_corpus(d2l_files)
    assert n_code > 2000 and n_math > 500 and n_tables > 0


def test_d2l_self_attention_structure(d2l: Path) -> None:
    path = d2l / SELF_ATTENTION
    doc = parse_markdown(path.read_text(encoding="utf-8"), str(path))
    assert doc.title == "Self-Attention and Positional Encoding"
    headings = [b.heading_path for b in doc.blocks if b.kind is BlockKind.HEADING]
    assert ("Self-Attention and Positional Encoding", "Positional Encoding") in headings
    assert (
        "Self-Attention and Positional Encoding",
        "Positional Encoding",
        "Absolute Positional Information",
    ) in headings
    first_heading = next(b for b in doc.blocks if b.kind is BlockKind.HEADING)
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[first_heading.line - 1] == "# Self-Attention and Positional Encoding"


@pytest.mark.parametrize(
    ("source", "title", "anchor"),
    [
        ("Query parameters {#query-parameters}", "Query parameters", "query-parameters"),
        ("Query parameters { #query-parameters }", "Query parameters", "query-parameters"),
        (
            "Start with the mockup {/*start-with-the-mockup*/}",
            "Start with the mockup",
            "start-with-the-mockup",
        ),
        ("`useState` の使い方 {/*usage*/}", "useState の使い方", "usage"),
        ("Plain heading", "Plain heading", ""),
        ("Braces {in} the middle", "Braces {in} the middle", ""),
    ],
)
def test_heading_markup_is_stripped_and_becomes_the_anchor(
    source: str, title: str, anchor: str
) -> None:
    assert heading_title(source) == title
    assert heading_anchor(source) == anchor


def test_explicit_heading_ids_reach_paths_and_chunk_anchors() -> None:
    src = (
        "# 使い方 {/*usage*/}\n\nはじめに。\n\n"
        "## 状態を追加する { #adding-state }\n\n本文です。\n\n"
        "## No id here\n\ntext\n\n##### Deep {/*deep*/}\n\nmore\n"
    )
    doc = parse_markdown(src, "ja/useState.md")
    paths = {b.heading_path for b in doc.blocks}
    assert ("使い方", "状態を追加する") in paths
    assert all("{" not in t for p in paths for t in p)
    drafts = [
        ChunkDraft(doc.body[b.start : b.end], b.start, b.end, b.heading_path, 3)
        for b in doc.blocks
        if b.kind is not BlockKind.HEADING
    ]
    chunks = build_chunks(
        doc,
        drafts,
        tenant="t",
        source="/d/useState.md",
        rel_path="useState.md",
        chapter="",
        base_url="https://react.dev/learn",
        created_at="2026-01-01T00:00:00Z",
    )
    by_text = {c.text: c for c in chunks}
    assert by_text["本文です。"].anchor == "adding-state"
    assert by_text["本文です。"].url == "https://react.dev/learn/useState.md#adding-state"
    assert by_text["text"].anchor == "no-id-here"  # no explicit id: slug of the title
    # An H5 is not a path entry, so its id does not replace its section's.
    assert by_text["more"].anchor == "no-id-here"
    assert by_text["はじめに。"].anchor == ""  # top-level: the page itself
