"""SectionChunker: sections, atomic blocks, table/list splits, merging, overlap; the
tests' own tide corpus and, with the evaluation data, d2l-en."""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import pytest

from ragline.embed.tokenizer import TokenCounter
from ragline.ingest.chunk import SectionChunker
from ragline.ingest.parse.markdown import parse_markdown
from ragline.types import Block, BlockKind, ChunkDraft, ParsedDocument, embed_head

COUNT = TokenCounter()
SELF_ATTENTION = (
    "chapter_attention-mechanisms-and-transformers/self-attention-and-positional-encoding.md"
)


def sentences(n: int, topic: str = "topic") -> str:
    return " ".join(f"Sentence {i} is about the {topic} we study here." for i in range(n))


def body_of(chunk: ChunkDraft, doc: ParsedDocument) -> str:
    assert chunk.text[chunk.prefix_len :] == doc.body[chunk.start : chunk.end]
    return doc.body[chunk.start : chunk.end]


def assert_no_loss(doc: ParsedDocument, chunks: list[ChunkDraft]) -> None:
    """Only whitespace may lie outside every chunk's [start, end)."""
    pos = 0
    for c in sorted(chunks, key=lambda c: c.start):
        body_of(c, doc)
        assert not doc.body[pos : c.start].strip(), doc.body[pos : c.start][:60]
        pos = max(pos, c.end)
    assert not doc.body[pos:].strip(), doc.body[pos:][:60]


def assert_never_cut(doc: ParsedDocument, chunks: list[ChunkDraft], kinds: set[BlockKind]) -> None:
    """Each block of ``kinds`` lies wholly inside a chunk, and no chunk cuts into it."""
    for b in doc.blocks:
        if b.kind not in kinds:
            continue
        holders = [c for c in chunks if c.start <= b.start and b.end <= c.end]
        assert holders, doc.body[b.start : b.end][:80]
        for c in chunks:
            overlaps = c.start < b.end and b.start < c.end
            assert not overlaps or (c.start <= b.start and b.end <= c.end), doc.body[
                b.start : b.end
            ][:80]


def chunk(src: str, **kw: int) -> tuple[ParsedDocument, list[ChunkDraft]]:
    doc = parse_markdown(src, "doc.md")
    chunks = SectionChunker(COUNT, **kw).chunk(doc)
    assert_no_loss(doc, chunks)
    for c in chunks:
        assert c.token_count == COUNT(c.text)
    return doc, chunks


def test_one_chunk_per_section_with_heading_paths() -> None:
    src = (
        f"# Guide\n\n{sentences(15, 'guide')}\n\n"
        f"## Install\n\n{sentences(15, 'install')}\n\n"
        f"## Usage\n\n{sentences(15, 'usage')}\n"
    )
    _, chunks = chunk(src)
    assert [c.heading_path for c in chunks] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Usage"),
    ]
    assert [c.text.split("\n")[0] for c in chunks] == ["# Guide", "## Install", "## Usage"]
    assert "install" not in chunks[0].text and "usage" not in chunks[1].text


def test_oversized_paragraph_splits_at_sentences_with_overlap() -> None:
    src = f"# Long\n\n{sentences(120)}\n"
    doc, chunks = chunk(src, max_tokens=128, overlap_tokens=20, min_tokens=10)
    assert len(chunks) > 5
    for c in chunks:
        assert c.token_count <= 128
        assert c.heading_path == ("Long",)
    for prev, nxt in pairwise(chunks):
        assert nxt.start < prev.end  # overlap with the previous chunk
        assert nxt.text.startswith("Sentence ")  # whole sentences
        assert prev.text.endswith("here.")
        assert COUNT(doc.body[nxt.start : prev.end]) <= 20


def test_overlap_never_crosses_a_section() -> None:
    src = f"## A\n\n{sentences(40, 'alpha')}\n\n## B\n\n{sentences(40, 'beta')}\n"
    doc, chunks = chunk(src, max_tokens=128, overlap_tokens=30, min_tokens=10)
    b_start = doc.body.index("## B")
    b_chunks = [c for c in chunks if c.heading_path == ("B",)]
    assert b_chunks[0].start == b_start
    assert all(c.start >= b_start for c in b_chunks)
    a_chunks = [c for c in chunks if c.heading_path == ("A",)]
    assert all(c.end <= b_start for c in a_chunks)


def test_oversized_code_block_is_its_own_whole_chunk() -> None:
    code = (
        "```python\n" + "\n".join(f"value_{i} = compute({i}) + offset" for i in range(80)) + "\n```"
    )
    src = f"# Code\n\n{sentences(12)}\n\n{code}\n\n{sentences(12, 'after')}\n"
    doc, chunks = chunk(src, max_tokens=200, overlap_tokens=20, min_tokens=20)
    holder = [c for c in chunks if code in c.text]
    assert len(holder) == 1
    assert holder[0].text == code
    assert holder[0].token_count > 200
    assert holder[0].has_code
    assert_never_cut(doc, chunks, {BlockKind.CODE})
    assert not [c for c in chunks if c is not holder[0] and c.has_code]


def test_big_table_is_split_between_rows_repeating_the_header() -> None:
    header = "| Name | Value | Comment |\n| --- | --- | --- |"
    rows = [f"| item {i} | {i * 7} | note about item number {i} |" for i in range(60)]
    table = header + "\n" + "\n".join(rows)
    src = f"## Table\n\n{sentences(3)}\n\n{table}\n\n{sentences(3, 'end')}\n"
    doc, chunks = chunk(src, max_tokens=120, overlap_tokens=10, min_tokens=10)
    parts = [c for c in chunks if c.has_table]
    assert len(parts) > 3
    assert parts[0].prefix_len == 0
    for part in parts[1:]:
        assert part.text[: part.prefix_len] == header + "\n"
        first_row = body_of(part, doc).split("\n")[0]
        assert first_row in rows  # parts start at a row boundary
    for part in parts:
        assert part.token_count <= 120
        assert header + "\n| item " in part.text  # every part reads as a table
    # every row is in some part, in order, exactly once
    seen = [line for p in parts for line in body_of(p, doc).split("\n") if line in rows]
    assert seen == rows


def test_table_that_fits_is_never_cut() -> None:
    table = "| a | b |\n| --- | --- |\n" + "\n".join(f"| x{i} | y{i} |" for i in range(10))
    src = f"## T\n\n{sentences(20)}\n\n{table}\n\n{sentences(20)}\n"
    doc, chunks = chunk(src, max_tokens=200, overlap_tokens=20, min_tokens=10)
    assert_never_cut(doc, chunks, {BlockKind.TABLE})
    assert all(c.prefix_len == 0 for c in chunks)


def test_list_kept_whole_when_it_fits() -> None:
    items = "\n".join(f"- point {i} about lists" for i in range(12))
    src = f"## L\n\n{sentences(14)}\n\n{items}\n\n{sentences(3)}\n"
    doc, chunks = chunk(src, max_tokens=200, overlap_tokens=0, min_tokens=10)
    assert_never_cut(doc, chunks, {BlockKind.LIST})


def test_big_list_is_split_between_items() -> None:
    items = [f"- item {i} says something short about lists." for i in range(60)]
    src = "## L\n\n" + "\n".join(items) + "\n"
    doc, chunks = chunk(src, max_tokens=100, overlap_tokens=0, min_tokens=10)
    list_chunks = [c for c in chunks if "- item" in c.text]
    assert len(list_chunks) > 3
    for c in list_chunks:
        assert c.token_count <= 100
        lines = [ln for ln in body_of(c, doc).split("\n") if ln.startswith("- item")]
        assert all(ln in items for ln in lines)  # no item is cut


def test_lone_heading_merges_into_the_subsection_it_introduces() -> None:
    src = f"# Book\n\n## Chapter\n\n{sentences(20)}\n"
    _, chunks = chunk(src)
    assert len(chunks) == 1
    assert chunks[0].text.startswith("# Book\n\n## Chapter")
    assert chunks[0].heading_path == ("Book", "Chapter")


def test_tiny_last_section_merges_into_the_previous_chunk() -> None:
    src = f"## Main\n\n{sentences(25)}\n\n## Exercises\n\n1. Try it.\n"
    _, chunks = chunk(src)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ("Main",)
    assert chunks[0].text.endswith("1. Try it.")


def test_tiny_remainder_merges_within_slack() -> None:
    # 52 sentences ≈ 10 tokens each: one full chunk plus a small remainder
    src = f"## S\n\n{sentences(52)}\n"
    _, chunks = chunk(src, max_tokens=500, overlap_tokens=0, min_tokens=100)
    assert len(chunks) == 1
    assert 500 < chunks[0].token_count <= 600


def test_undersized_piece_between_huge_code_blocks_is_kept() -> None:
    code = "```\n" + "\n".join(f"x{i} = y{i} * z{i}" for i in range(60)) + "\n```"
    src = f"## C\n\n{code}\n\nA short note.\n\n{code.replace('x', 'w')}\n"
    doc, chunks = chunk(src, max_tokens=100, overlap_tokens=10, min_tokens=30)
    note = [c for c in chunks if "A short note." in c.text]
    assert len(note) == 1 and note[0].text == "A short note."
    assert_never_cut(doc, chunks, {BlockKind.CODE})


def test_display_maths_never_cut() -> None:
    maths = "$$\n" + " + ".join(f"a_{{{i}}} x^{{{i}}}" for i in range(40)) + "\n$$"
    src = f"## M\n\n{sentences(10)}\n\n{maths}\n\n{sentences(10)}\n"
    doc, chunks = chunk(src, max_tokens=120, overlap_tokens=20, min_tokens=10)
    assert_never_cut(doc, chunks, {BlockKind.MATH})
    assert [c.has_equations for c in chunks].count(True) == 1


def test_token_counting_is_batched() -> None:
    class Counting:
        def __init__(self) -> None:
            self.single = 0
            self.batches = 0

        def __call__(self, text: str) -> int:
            self.single += 1
            return COUNT(text)

        def count_many(self, texts: list[str]) -> list[int]:
            self.batches += 1
            return COUNT.count_many(texts)

    src = "\n\n".join(f"## S{i}\n\n{sentences(12)}" for i in range(30))
    counter = Counting()
    chunks = SectionChunker(counter, overlap_tokens=0).chunk(parse_markdown(src, "b.md"))
    assert len(chunks) == 30
    assert (counter.batches, counter.single) == (2, 0)  # blocks once, chunks once


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="overlap_tokens"):
        SectionChunker(COUNT, max_tokens=50, overlap_tokens=50)
    assert SectionChunker(COUNT).chunk(ParsedDocument("e.md", "e", " \n ", ())) == []


def test_text_outside_blocks_is_still_chunked() -> None:
    body = "loose intro text\n\nblock text here\n\ntrailing words"
    start = body.index("block")
    block = Block(BlockKind.PARAGRAPH, start, start + len("block text here"), ())
    doc = ParsedDocument("h.md", "h", body, (block,))
    chunks = SectionChunker(COUNT, min_tokens=0).chunk(doc)
    assert_no_loss(doc, chunks)
    assert "".join(c.text for c in chunks).count("loose intro text") == 1


def test_a_new_page_starts_a_new_chunk() -> None:
    """Pages of one section are neither packed nor merged together, so each chunk
    cites one page, however small."""
    pages = [sentences(3, "pumps"), sentences(3, "valves"), sentences(3, "seals")]
    body = "\n\n".join(pages)
    blocks, pos = [], 0
    for number, text in enumerate(pages, start=1):
        blocks.append(Block(BlockKind.PAGE, pos, pos + len(text), (), page=number))
        pos += len(text) + 2
    doc = ParsedDocument("a.pdf", "A", body, tuple(blocks), format="pdf")
    chunks = SectionChunker(COUNT, max_tokens=400, overlap_tokens=0, min_tokens=0).chunk(doc)
    assert [(c.page, body_of(c, doc)) for c in chunks] == list(enumerate(pages, start=1))
    merged = SectionChunker(COUNT, max_tokens=400, overlap_tokens=0, min_tokens=100).chunk(doc)
    assert [(c.page, body_of(c, doc)) for c in merged] == list(enumerate(pages, start=1))
    assert_no_loss(doc, merged)


def check_corpus_chunks(files: list[Path], chunker: SectionChunker, limit: int) -> int:
    """Chunk every file: nothing lost, code and maths never cut, no chunk over
    ``limit`` tokens unless it is one atomic block. Returns the chunk count."""
    docs = [parse_markdown(p.read_text(encoding="utf-8"), str(p)) for p in files]
    started = time.perf_counter()
    all_chunks = [chunker.chunk(doc) for doc in docs]
    elapsed = time.perf_counter() - started
    n_chunks = sum(len(c) for c in all_chunks)
    print(f"\nsection-chunked {len(docs)} files into {n_chunks} chunks in {elapsed:.2f} s")
    for doc, chunks in zip(docs, all_chunks, strict=True):
        assert_no_loss(doc, chunks)
        assert_never_cut(doc, chunks, {BlockKind.CODE, BlockKind.MATH})
        for c in chunks:
            atomic = [
                b
                for b in doc.blocks
                if b.kind in (BlockKind.CODE, BlockKind.MATH, BlockKind.TABLE)
                and (b.start, b.end) == (c.start, c.end)
            ]
            assert c.token_count <= limit or atomic, (doc.source, c.text[:80])
    return n_chunks


def test_tide_harmonics_small_chunks_keep_maths_whole_and_split_tables_by_row(
    tides: Path,
) -> None:
    path = tides / "harmonics.md"
    doc = parse_markdown(path.read_text(encoding="utf-8"), str(path))
    chunks = SectionChunker(COUNT, max_tokens=80, overlap_tokens=10, min_tokens=10).chunk(doc)
    assert_no_loss(doc, chunks)
    assert_never_cut(doc, chunks, {BlockKind.MATH})
    header = "| Name | Origin | Period (hours) | Typical share |\n| --- | --- | --- | --- |\n"
    parts = [c for c in chunks if c.has_table]
    assert len(parts) > 1 and all(header in p.text for p in parts)  # each reads as a table
    assert all(p.text.startswith(header) for p in parts[1:])  # the header repeated
    paths = {c.heading_path for c in chunks}
    assert ("Harmonic Constituents", "The harmonic model", "Fitting the amplitudes") in paths
    assert ("Harmonic Constituents", "The main constituents") in paths
    assert all(c.heading_path[0] == "Harmonic Constituents" for c in chunks)
    assert sum(c.has_equations for c in chunks) >= 2


def test_every_tide_file_chunks_without_loss(tides: Path) -> None:
    files = sorted(tides.glob("*.md"))
    n_chunks = check_corpus_chunks(files, SectionChunker(COUNT, max_tokens=100, min_tokens=20), 200)
    assert n_chunks > len(files)  # small windows: several chunks per file


def test_d2l_self_attention(d2l: Path) -> None:
    path = d2l / SELF_ATTENTION
    doc = parse_markdown(path.read_text(encoding="utf-8"), str(path))
    chunks = SectionChunker(COUNT).chunk(doc)
    assert_no_loss(doc, chunks)
    assert_never_cut(doc, chunks, {BlockKind.CODE, BlockKind.MATH, BlockKind.TABLE})
    paths = {c.heading_path for c in chunks}
    assert ("Self-Attention and Positional Encoding", "Positional Encoding") in paths
    assert ("Self-Attention and Positional Encoding", "Self-Attention") in paths
    for c in chunks:
        assert c.heading_path[0] == "Self-Attention and Positional Encoding"
        assert c.token_count <= 512 + 100 or c.text.startswith("```")
    assert any(c.has_code for c in chunks) and any(c.has_equations for c in chunks)


def test_every_d2l_file_chunks_without_loss(d2l: Path) -> None:
    files = sorted(d2l.rglob("*.md"))
    assert len(files) == 192
    check_corpus_chunks(files, SectionChunker(TokenCounter()), 612)


# -- the embedder's window (issue 28: no chunk is partly invisible) -----------------------


def fits_window(doc: ParsedDocument, c: ChunkDraft, window: int) -> bool:
    """What the embedder reads of the chunk (heading line, then text) fits ``window``."""
    return COUNT(embed_head(doc.title, c.heading_path) + c.text) <= window


def test_code_block_larger_than_the_window_is_cut_at_lines_repeating_its_fence() -> None:
    lines = [f"value_{i} = compute({i}) + offset" for i in range(80)]
    code = "```python\n" + "\n".join(lines) + "\n```"
    src = f"# Code\n\n{sentences(12)}\n\n{code}\n\n{sentences(12, 'after')}\n"
    doc, chunks = chunk(src, max_tokens=200, overlap_tokens=20, min_tokens=20, window=254)
    assert_no_loss(doc, chunks)
    parts = [c for c in chunks if c.has_code]
    assert len(parts) >= 4  # ~1,000 tokens of code in a 254-token window
    assert parts[0].text.startswith("```python\nvalue_0 =") and parts[0].prefix_len == 0
    for c in parts[1:]:
        assert c.text[: c.prefix_len] == "```python\n"
        assert doc.body[c.start - 1] == "\n"  # a piece starts at a line
    for c in chunks:
        assert fits_window(doc, c, 254), c.text[:60]
    # every line of code is in exactly one piece, whole
    assert [
        ln for c in parts for ln in body_of(c, doc).splitlines() if ln.startswith("value_")
    ] == lines


def test_table_row_larger_than_the_window_is_cut_with_the_header_repeated() -> None:
    header = "| Name | Notes |\n| --- | --- |"
    big_row = "| big | " + sentences(40) + " |"
    table = f"{header}\n| small | one |\n{big_row}\n| last | two |"
    doc, chunks = chunk(
        f"# T\n\n{table}\n", max_tokens=200, overlap_tokens=0, min_tokens=0, window=126
    )
    assert_no_loss(doc, chunks)
    for c in chunks:
        assert fits_window(doc, c, 126), c.text[:60]
        if c.start > doc.body.index(big_row):
            assert c.text.startswith(header + "\n")


def test_merges_stop_at_the_window() -> None:
    # without a window, the small tail is merged into a full chunk (up to max + min)
    src = f"# A\n\n{sentences(18)}\n\n{sentences(3, 'tail')}\n"
    _, unbounded = chunk(src, max_tokens=200, overlap_tokens=0, min_tokens=100)
    assert max(c.token_count for c in unbounded) > 210
    doc, chunks = chunk(src, max_tokens=200, overlap_tokens=0, min_tokens=100, window=210)
    assert_no_loss(doc, chunks)
    assert all(fits_window(doc, c, 210) for c in chunks)


def test_every_d2l_chunk_fits_minilms_window(d2l: Path) -> None:
    """11 % of d2l chunks passed MiniLM's 256 tokens (merged pieces up to 324, code
    blocks up to 1,109), so their tails were never embedded. A third of the book
    (every third file) keeps the test short."""
    chunker = SectionChunker(COUNT, max_tokens=224, overlap_tokens=50, min_tokens=100, window=254)
    files = sorted(d2l.rglob("*.md"))[::3]
    assert len(files) == 64
    for path in files:
        doc = parse_markdown(path.read_text(encoding="utf-8"), str(path))
        chunks = chunker.chunk(doc)
        assert_no_loss(doc, chunks)
        for c in chunks:
            assert fits_window(doc, c, 254), (path.name, c.text[:60])
