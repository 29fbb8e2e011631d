"""Acceptance on the real d2l-en textbook (192 Markdown files), copied to a tmp dir.

One ingest of the whole book is shared by the tests of this module (≈ 2 minutes
on 2 cores); the speed ratios live in benchmarks/, not in assertions here.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.ingest.report import IngestReport
from ragline.settings import Settings

ATTENTION = "chapter_attention-mechanisms-and-transformers"
SELF_ATTENTION = f"{ATTENTION}/self-attention-and-positional-encoding.md"


@pytest.fixture(scope="module")
def book(
    d2l: Path, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Ragline, Path, IngestReport]]:
    root = tmp_path_factory.mktemp("d2l")
    corpus = root / "d2l-en"
    shutil.copytree(d2l, corpus)
    rag = Ragline(Settings(index_dir=root / "index"), embedder=embedder)
    report = rag.ingest(corpus)
    yield rag, corpus, report
    rag.close()


def test_whole_book_indexes_without_failures(
    book: tuple[Ragline, Path, IngestReport],
) -> None:
    _, _, report = book
    assert report.files == 192
    assert report.failed == []
    assert len(report.indexed) == 192
    assert report.chunks == report.chunks_embedded == report.index_chunks > 1000
    assert ATTENTION in report.per_chapter
    assert sum(c.files for c in report.per_chapter.values()) == 192


def test_positional_encoding_question_finds_the_self_attention_section(
    book: tuple[Ragline, Path, IngestReport],
) -> None:
    rag, corpus, _ = book
    result = rag.search("How does positional encoding work in self-attention?", mode="hybrid")
    top = result.hits[0].chunk
    assert top.source == (corpus / SELF_ATTENTION).as_posix()
    assert top.title == "Self-Attention and Positional Encoding"
    assert {"embed", "vector", "keyword", "fusion", "total"} <= set(result.timings_ms)


def test_filters_reach_the_index(book: tuple[Ragline, Path, IngestReport]) -> None:
    rag, _, _ = book
    hits = rag.search("gradient descent", filters={"chapter": ATTENTION, "has_code": True}).hits
    assert hits and all(h.chunk.chapter == ATTENTION and h.chunk.has_code for h in hits)


def test_rerun_edit_and_delete_touch_only_what_changed(
    book: tuple[Ragline, Path, IngestReport],
) -> None:
    rag, corpus, first = book
    again = rag.ingest(corpus)
    assert again.chunks_embedded == 0 and again.indexed == []
    assert len(again.skipped) == 192 and again.index_chunks == first.index_chunks

    target = corpus / SELF_ATTENTION
    source = target.as_posix()
    before = rag.store.info({"source": source}).chunks
    target.write_text(
        target.read_text() + "\n\n## Summary of the edit\n\nA short closing remark.\n"
    )
    edited = rag.ingest(corpus)
    assert edited.indexed == [SELF_ATTENTION]
    assert 1 <= edited.chunks_embedded <= 2  # the new section (and the chunk it merged into)
    assert edited.chunks_reused >= before - 2

    doomed = corpus / f"{ATTENTION}/bahdanau-attention.md"
    doomed_source = doomed.as_posix()
    assert rag.store.info({"source": doomed_source}).chunks > 0
    doomed.unlink()
    deleted = rag.ingest(corpus)
    assert deleted.deleted == [f"{ATTENTION}/bahdanau-attention.md"]
    assert rag.store.info({"source": doomed_source}).chunks == 0
    for mode in ("bm25", "vector"):
        hits = rag.search("Bahdanau attention mechanism", mode=mode, top_k=50).hits  # type: ignore[arg-type]
        assert all(h.chunk.source != doomed_source for h in hits)
