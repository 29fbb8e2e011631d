"""Property tests: both chunkers on generated Markdown and arbitrary text.

Guarantees checked, for every generated document:
(1) no body text is lost, (2) a chunk's text is its body span (plus, for a split
table's later parts, the repeated header), (3) size bounds, (4) section chunker
only: code, display maths and tables that fit are never cut.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.embed.tokenizer import TokenCounter
from ragline.ingest.chunk import RecursiveChunker, SectionChunker
from ragline.ingest.errors import IngestError
from ragline.ingest.parse.markdown import parse_markdown
from ragline.ingest.parse.text import parse_text
from ragline.types import BlockKind, ChunkDraft, ParsedDocument, embed_head

COUNT = TokenCounter()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- generated Markdown ----------------------------------------------------------------

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)
SENTENCE = st.builds(
    lambda words, end: " ".join(words) + end,
    st.lists(WORD, min_size=1, max_size=14),
    st.sampled_from([".", "?", "!", ";", ",", ""]),
)


@st.composite
def paragraph(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 60))
    sents = draw(st.lists(SENTENCE, min_size=n, max_size=n))
    joints = draw(st.lists(st.sampled_from([" ", "\n"]), min_size=n, max_size=n))
    return "".join(s + j for s, j in zip(sents, joints, strict=True)).strip()


@st.composite
def heading(draw: st.DrawFn) -> str:
    return (
        "#" * draw(st.integers(1, 6)) + " " + " ".join(draw(st.lists(WORD, min_size=1, max_size=5)))
    )


CODE_TOKEN = st.sampled_from(["x", "y1", "=", "foo(", ")", "42", "+", "return", "  ", "#", "."])


@st.composite
def code(draw: st.DrawFn) -> str:
    fence, close = draw(
        st.sampled_from(
            [("```", "```"), ("~~~", "~~~"), ("```python", "```"), ("```{.python .input}", "```")]
        )
    )
    lines = draw(st.lists(st.lists(CODE_TOKEN, max_size=12).map(" ".join), min_size=1, max_size=80))
    return "\n".join([fence, *lines, close])


@st.composite
def table(draw: st.DrawFn) -> str:
    cols = draw(st.integers(1, 4))
    cell = st.lists(WORD, min_size=1, max_size=4).map(" ".join)
    row = st.lists(cell, min_size=cols, max_size=cols).map(lambda c: "| " + " | ".join(c) + " |")
    header = draw(row)
    rows = draw(st.lists(row, max_size=60))
    return "\n".join([header, "|" + " --- |" * cols, *rows])


@st.composite
def md_list(draw: st.DrawFn) -> str:
    items = draw(st.lists(SENTENCE, min_size=1, max_size=50))
    ordered = draw(st.booleans())
    return "\n".join((f"{i + 1}. " if ordered else "- ") + s for i, s in enumerate(items))


@st.composite
def maths(draw: st.DrawFn) -> str:
    atom = st.sampled_from(["x^2", "+", "\\frac{a}{b}", "y_i", "=", "\\sum_{i=1}^n", "\\alpha"])
    lines = draw(
        st.lists(st.lists(atom, min_size=1, max_size=10).map(" ".join), min_size=1, max_size=30)
    )
    return "\n".join(["$$", *lines, "$$"])


BLOCK = st.one_of(
    heading(),
    heading(),
    paragraph(),
    paragraph(),
    code(),
    table(),
    md_list(),
    maths(),
    SENTENCE.map(lambda s: "> " + s),
)


@st.composite
def markdown_doc(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(BLOCK, min_size=1, max_size=25))
    seps = draw(
        st.lists(
            st.sampled_from(["\n\n", "\n\n\n", "\n\n  \n"]),
            min_size=len(blocks),
            max_size=len(blocks),
        )
    )
    return "".join(b + s for b, s in zip(blocks, seps, strict=True))


SECTION_CONFIGS = st.sampled_from(
    [(512, 50, 100), (64, 10, 16), (96, 0, 0), (128, 30, 0), (40, 8, 10), (200, 20, 50)]
)
RECURSIVE_CONFIGS = st.sampled_from([(500, 50), (120, 30), (50, 0), (80, 79), (1000, 100)])

# -- checks ----------------------------------------------------------------------------


def check_common(doc: ParsedDocument, chunks: list[ChunkDraft]) -> None:
    body = doc.body
    covered = bytearray(len(body))
    for c in chunks:
        assert 0 <= c.start < c.end <= len(body)
        assert c.text[c.prefix_len :] == body[c.start : c.end]  # (2)
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    lost = [i for i, ch in enumerate(body) if not ch.isspace() and not covered[i]]
    assert not lost, f"lost {body[lost[0] : lost[0] + 40]!r}"  # (1)
    for prev, nxt in pairwise(chunks):
        assert prev.start < nxt.start and prev.end < nxt.end  # in order, none nested


def atomic_blocks(doc: ParsedDocument) -> list[tuple[int, int]]:
    return [
        (b.start, b.end)
        for b in doc.blocks
        if b.kind in (BlockKind.CODE, BlockKind.MATH, BlockKind.TABLE, BlockKind.HEADING)
    ]


def check_section(doc: ParsedDocument, chunks: list[ChunkDraft], max_t: int, min_t: int) -> None:
    check_common(doc, chunks)
    body = doc.body
    tables = [b for b in doc.blocks if b.kind is BlockKind.TABLE]
    whole_atomic = set(atomic_blocks(doc))
    for c in chunks:
        assert c.token_count == COUNT(c.text)
        if c.prefix_len:  # a later part of a split table repeats that table's header
            (t,) = [t for t in tables if t.start < c.start < t.end]
            header_end = body.index("\n", body.index("\n", t.start) + 1)
            assert c.text[: c.prefix_len] == body[t.start : header_end] + "\n"
            assert body[c.start - 1] == "\n"
        # (3) size: over the budget only for one atomic block or one table row,
        # or (with merging on) by at most min_tokens
        single_atomic = (c.start, c.end) in whole_atomic
        lines = body[c.start : c.end].count("\n") + 1
        single_row = any(  # (the first part of a table also holds its two header rows)
            t.start <= c.start and c.end <= t.end and lines <= (3 if c.start == t.start else 1)
            for t in tables
        )
        if not (single_atomic or single_row):
            assert c.token_count <= max_t + min_t, c.text[:80]
            if min_t == 0:
                assert c.token_count <= max_t, c.text[:80]
        # heading path is the path of a block the chunk covers
        paths = {b.heading_path for b in doc.blocks if b.start < c.end and c.start < b.end}
        assert c.heading_path in paths
    # (4) code blocks, maths and tables that fit lie wholly in a chunk; nothing cuts them
    for b in doc.blocks:
        fits = b.kind is not BlockKind.TABLE or COUNT(body[b.start : b.end]) <= max_t
        if b.kind not in (BlockKind.CODE, BlockKind.MATH, BlockKind.TABLE) or not fits:
            continue
        assert any(c.start <= b.start and b.end <= c.end for c in chunks), body[b.start : b.end]
        for c in chunks:
            if c.start < b.end and b.start < c.end:
                assert c.start <= b.start and b.end <= c.end, body[b.start : b.end][:60]
    # overlap never reaches back over a section heading
    section_starts = [b.start for b in doc.blocks if b.kind is BlockKind.HEADING and b.level <= 4]
    for prev, nxt in pairwise(chunks):
        if nxt.start < prev.end:
            assert not [s for s in section_starts if nxt.start < s < prev.end]


# -- properties --------------------------------------------------------------------------


@SETTINGS
@given(src=markdown_doc(), config=SECTION_CONFIGS)
def test_section_chunker_on_generated_markdown(src: str, config: tuple[int, int, int]) -> None:
    max_t, overlap, min_t = config
    doc = parse_markdown(src, "gen.md")
    chunks = SectionChunker(
        COUNT, max_tokens=max_t, overlap_tokens=overlap, min_tokens=min_t
    ).chunk(doc)
    check_section(doc, chunks, max_t, min_t)


@SETTINGS
@given(src=markdown_doc(), config=RECURSIVE_CONFIGS)
def test_recursive_chunker_on_generated_markdown(src: str, config: tuple[int, int]) -> None:
    size, overlap = config
    doc = parse_markdown(src, "gen.md")
    chunks = RecursiveChunker(COUNT, chunk_chars=size, overlap_chars=overlap).chunk(doc)
    check_common(doc, chunks)
    for c in chunks:
        assert len(c.text) <= size  # (3)
        assert c.prefix_len == 0
        assert c.token_count == COUNT(c.text)


CHAR = st.characters(codec="utf-8", exclude_categories=["Cs"])
SPACES = st.sampled_from(
    [" ", "\n", "\n\n", "\t", "\u00a0", "\u2028", "\x0c", "\x1c", "\u3000", " \n \n"]
)
# Long runs of odd words and odd whitespace (Unicode spaces, control chars, CJK, emoji).
ANY_TEXT = st.one_of(
    st.text(CHAR, min_size=1, max_size=2000),
    st.lists(
        st.tuples(st.text(CHAR, min_size=1, max_size=15), SPACES), min_size=30, max_size=400
    ).map(lambda pairs: "".join(w + sp for w, sp in pairs) or "x"),
)


@SETTINGS
@given(text=ANY_TEXT, config=SECTION_CONFIGS)
def test_section_chunker_on_arbitrary_text(text: str, config: tuple[int, int, int]) -> None:
    max_t, overlap, min_t = config
    doc = parse_text(text, "any.txt")
    chunks = SectionChunker(
        COUNT, max_tokens=max_t, overlap_tokens=overlap, min_tokens=min_t
    ).chunk(doc)
    check_section(doc, chunks, max_t, min_t)


@SETTINGS
@given(text=ANY_TEXT, config=RECURSIVE_CONFIGS)
def test_recursive_chunker_on_arbitrary_text(text: str, config: tuple[int, int]) -> None:
    size, overlap = config
    doc = parse_text(text, "any.txt")
    chunks = RecursiveChunker(COUNT, chunk_chars=size, overlap_chars=overlap).chunk(doc)
    check_common(doc, chunks)
    assert all(len(c.text) <= size for c in chunks)


@SETTINGS
@given(text=st.one_of(ANY_TEXT, markdown_doc()))
def test_markdown_parser_spans_on_any_input(text: str) -> None:
    try:
        doc = parse_markdown(text, "any.md")
    except IngestError as err:  # only a front matter block may be rejected
        assert text.startswith("---") and "front matter" in err.reason
        return
    covered = bytearray(len(doc.body))
    prev_end = 0
    for b in doc.blocks:
        assert prev_end <= b.start < b.end <= len(doc.body)
        covered[b.start : b.end] = b"\x01" * (b.end - b.start)
        prev_end = b.end
    assert all(covered[i] for i, ch in enumerate(doc.body) if not ch.isspace())


# -- the embedder's window ------------------------------------------------------------------

WINDOW_CONFIGS = st.sampled_from(
    [(254, (224, 50, 100)), (126, (96, 20, 40)), (80, (64, 10, 16)), (254, (512, 50, 100))]
)
LONG_LINE = st.lists(WORD, min_size=40, max_size=120).map(" ".join)


@st.composite
def long_code(draw: st.DrawFn) -> str:
    """A fenced code block of up to ~2,000 tokens, some lines longer than a window."""
    fence = draw(st.sampled_from(["```", "~~~", "```python", "```{.python .input}"]))
    line = st.one_of(st.lists(CODE_TOKEN, max_size=12).map(" ".join), LONG_LINE)
    lines = draw(st.lists(line, min_size=1, max_size=120))
    return "\n".join([fence, *lines, "```" if fence.startswith("`") else "~~~"])


WINDOW_BLOCK = st.one_of(heading(), paragraph(), long_code(), table(), md_list(), maths())


@st.composite
def window_doc(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(WINDOW_BLOCK, min_size=1, max_size=12))
    return "".join(b + "\n\n" for b in blocks)


def fence_of(body: str, doc: ParsedDocument, at: int) -> str | None:
    """The opening fence line of the fenced code block holding ``at``, if any."""
    for b in doc.blocks:
        if b.kind is BlockKind.CODE and b.start < at < b.end:
            return body[b.start : body.index("\n", b.start) + 1]
    return None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=window_doc(), config=WINDOW_CONFIGS)
def test_every_section_chunk_fits_the_embedders_window(
    src: str, config: tuple[int, tuple[int, int, int]]
) -> None:
    """What the embedder reads of every chunk (title and heading path, then the
    text) fits its window, counted with the real tokenizer; nothing is lost; a
    later part of a cut code block or table starts with its fence or header."""
    window, (max_t, overlap, min_t) = config
    doc = parse_markdown(src, "gen.md")
    chunks = SectionChunker(
        COUNT, max_tokens=max_t, overlap_tokens=overlap, min_tokens=min_t, window=window
    ).chunk(doc)
    check_common(doc, chunks)
    body = doc.body
    for c in chunks:
        assert c.token_count == COUNT(c.text)
        head = COUNT(embed_head(doc.title, c.heading_path))
        assert c.token_count <= max(window - head, window // 2), c.text[:80]
        if c.prefix_len:
            fence = fence_of(body, doc, c.start)
            tables = [t for t in doc.blocks if t.kind is BlockKind.TABLE and t.start < c.start]
            header = [
                body[t.start : body.index("\n", body.index("\n", t.start) + 1) + 1] for t in tables
            ]
            assert c.text[: c.prefix_len] in ([fence] if fence else header)
