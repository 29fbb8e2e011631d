"""No chunk is larger than the hard cap: a line without spaces (one "token" to the
tokenizer), an oversized code block, or any text, whichever chunker cuts it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.embed.tokenizer import TokenCounter
from ragline.engine import Ragline
from ragline.ingest.chunk import CappedChunker, RecursiveChunker, SectionChunker
from ragline.ingest.chunk.cap import cut_spans
from ragline.ingest.parse.markdown import parse_markdown
from ragline.ingest.parse.text import parse_text
from ragline.types import ChunkDraft

COUNT = TokenCounter()
CAP = 300

PIECE = st.one_of(
    st.text(alphabet="abc xyz\n.", min_size=1, max_size=200),
    st.integers(1, 3000).map(lambda n: "Q" * n),  # a run with no space to cut at
    st.integers(1, 80).map(lambda n: "```\n" + "code = 1\n" * n + "```"),
    st.just("\n\n# Heading\n\n"),
)
DOC = st.lists(PIECE, min_size=1, max_size=12).map("".join)


def check(body: str, drafts: list[ChunkDraft]) -> None:
    for d in drafts:
        assert len(d.text) <= CAP
        assert d.text[d.prefix_len :] == body[d.start : d.end]
    covered = bytearray(len(body))
    for d in drafts:
        covered[d.start : d.end] = b"\1" * (d.end - d.start)
    lost = [i for i, c in enumerate(body) if not c.isspace() and not covered[i]]
    assert not lost


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOC)
def test_no_chunk_exceeds_the_cap_and_nothing_is_lost(text: str) -> None:
    if not text.strip():
        return
    md = parse_markdown(text, "doc.md")
    section = CappedChunker(SectionChunker(COUNT, max_tokens=64, overlap_tokens=8), COUNT, CAP)
    check(md.body, section.chunk(md))
    plain = parse_text(text, "doc.txt")
    recursive = CappedChunker(RecursiveChunker(COUNT, chunk_chars=2000), COUNT, CAP)
    check(plain.body, recursive.chunk(plain))


def test_cut_spans_prefer_line_breaks_then_spaces() -> None:
    body = "a" * 70 + "\n" + "b" * 60 + " " + "c" * 60
    assert cut_spans(body, 0, len(body), 100) == [(0, 70), (71, 131), (132, 192)]
    assert cut_spans("x" * 250, 0, 250, 100) == [(0, 100), (100, 200), (200, 250)]
    assert cut_spans("   \n  ", 0, 6, 100) == []


def test_a_line_without_spaces_is_cut_into_capped_chunks(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    """It was one chunk: every search that hit it returned the whole line."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    line = "".join(f"zebra{i:07d}" for i in range(100_000))  # 1.2 MB, no space
    (corpus / "blob.txt").write_text("Zebra stripes.\n\n" + line + "\n")
    rag = make_rag(chunk_max_chars=4000)
    report = rag.ingest(corpus)
    assert report.indexed == ["blob.txt"] and report.chunks >= len(line) // 4000
    hits = rag.search("zebra stripes", top_k=5).hits
    assert hits and all(len(h.chunk.text) <= 4000 for h in hits)
    stored = rag.store.chunks_by_index(hits[0].chunk.doc_id, range(report.chunks))
    assert len(stored) == report.chunks and max(len(c.text) for c in stored) <= 4000
