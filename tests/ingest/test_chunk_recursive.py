"""RecursiveChunker: window size, separator priority, overlap, metadata; the tests'
own tide corpus and, with the evaluation data, d2l-en."""

from __future__ import annotations

import time
from itertools import pairwise
from pathlib import Path

import pytest

from ragline.embed.tokenizer import TokenCounter
from ragline.ingest.chunk import RecursiveChunker
from ragline.ingest.parse.markdown import parse_markdown
from ragline.ingest.parse.text import parse_text
from ragline.types import ChunkDraft, ParsedDocument

COUNT = TokenCounter()


def assert_exact_and_complete(doc: ParsedDocument, chunks: list[ChunkDraft], size: int) -> None:
    """Exact spans within the size; only whitespace lies outside every chunk."""
    pos = 0
    for c in chunks:
        assert c.text == doc.body[c.start : c.end]
        assert 0 < len(c.text) <= size
        assert not doc.body[pos : c.start].strip(), doc.body[pos : c.start][:60]
        pos = max(pos, c.end)
    assert not doc.body[pos:].strip()


def test_short_text_is_one_chunk() -> None:
    doc = parse_text("  Just a little text.  \n", "a.txt")
    chunks = RecursiveChunker(COUNT).chunk(doc)
    assert [(c.text, c.start) for c in chunks] == [("Just a little text.", 2)]
    assert chunks[0].token_count == COUNT("Just a little text.")


def test_paragraph_break_in_last_30_percent_wins() -> None:
    first = "a" * 60 + ". " + "b" * 10  # sentence break early: outside the search zone
    body = first + "\n\n" + "c" * 50
    chunks = RecursiveChunker(COUNT, chunk_chars=100, overlap_chars=0).spans(body)
    # window [0, 100): search zone [70, 100) holds "\n\n" at 72 → the chunk ends there
    assert chunks[0] == (0, 72)


def test_higher_priority_separator_beats_a_later_lower_one() -> None:
    body = "w" * 72 + "\n" + "x" * 10 + ". " + "y" * 5 + " " + "z" * 40
    start, end = RecursiveChunker(COUNT, chunk_chars=100, overlap_chars=0).spans(body)[0]
    assert (start, end) == (0, 72)  # "\n" (at 72) outranks ". " (83) and " " (91)


def test_sentence_end_keeps_its_punctuation() -> None:
    body = "v" * 75 + ". " + "w" * 60
    (s, e), _ = RecursiveChunker(COUNT, chunk_chars=100, overlap_chars=0).spans(body)
    assert body[s:e].endswith("v.")


def test_hard_cut_without_separators() -> None:
    body = "x" * 250
    spans = RecursiveChunker(COUNT, chunk_chars=100, overlap_chars=0).spans(body)
    assert spans == [(0, 100), (100, 200), (200, 250)]


def test_overlap_starts_at_a_word_boundary() -> None:
    words = " ".join(f"word{i:03d}" for i in range(300))
    doc = parse_text(words, "w.txt")
    chunks = RecursiveChunker(COUNT, chunk_chars=200, overlap_chars=40).chunk(doc)
    assert len(chunks) > 5
    for prev, nxt in pairwise(chunks):
        assert prev.end - 40 <= nxt.start < prev.end
        assert doc.body[nxt.start - 1] == " "
        assert nxt.text.startswith("word")
    assert_exact_and_complete(doc, chunks, 200)


def test_heading_path_of_the_block_where_the_chunk_starts() -> None:
    src = "# Top\n\n" + "alpha beta. " * 40 + "\n\n## Next\n\n" + "gamma delta. " * 40
    doc = parse_markdown(src, "h.md")
    chunks = RecursiveChunker(COUNT).chunk(doc)
    assert_exact_and_complete(doc, chunks, 500)
    assert chunks[0].heading_path == ("Top",)
    for c in chunks:
        expected = ("Top", "Next") if c.start >= doc.body.index("## Next") else ("Top",)
        assert c.heading_path == expected


def test_flags_from_overlapped_blocks() -> None:
    src = "Intro.\n\n```\ncode here\n```\n\n$$\nx^2\n$$\n\n| a |\n|---|\n| 1 |\n"
    doc = parse_markdown(src, "f.md")
    (only,) = RecursiveChunker(COUNT).chunk(doc)
    assert (only.has_code, only.has_equations, only.has_table) == (True, True, True)
    plain = RecursiveChunker(COUNT).chunk(parse_markdown("Just prose.\n", "p.md"))
    assert (plain[0].has_code, plain[0].has_equations, plain[0].has_table) == (False,) * 3


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="overlap_chars"):
        RecursiveChunker(COUNT, chunk_chars=100, overlap_chars=100)


def check_corpus(files: list[Path], chunker: RecursiveChunker, size: int) -> int:
    """Exact, complete chunks of every file, most cuts on a separator; the count."""
    docs = [parse_markdown(p.read_text(encoding="utf-8"), str(p)) for p in files]
    started = time.perf_counter()
    all_chunks = [chunker.chunk(doc) for doc in docs]
    elapsed = time.perf_counter() - started
    n_chunks = sum(len(c) for c in all_chunks)
    print(f"\nrecursive-chunked {len(docs)} files into {n_chunks} chunks in {elapsed:.2f} s")
    for doc, chunks in zip(docs, all_chunks, strict=True):
        assert_exact_and_complete(doc, chunks, size)
        # most cuts land on a separator, not mid-word
        hard = sum(1 for c in chunks[:-1] if doc.body[c.end : c.end + 1].isalnum())
        assert hard <= max(1, len(chunks) // 10), doc.source
    return n_chunks


def test_every_tide_file(tides: Path) -> None:
    files = sorted(tides.glob("*.md"))
    n_chunks = check_corpus(files, RecursiveChunker(COUNT, chunk_chars=300, overlap_chars=40), 300)
    assert n_chunks > 2 * len(files)


def test_every_d2l_file(d2l: Path) -> None:
    files = sorted(d2l.rglob("*.md"))
    assert len(files) == 192
    check_corpus(files, RecursiveChunker(TokenCounter()), 500)
