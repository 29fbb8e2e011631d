"""Faults of a remote store or embedder during an ingest: a refused batch write is
retried with backoff, a batch that still fails is reported and the run goes on, and
a chunk the embedder cannot embed is left out alone (its file is indexed without it).

The store is a real LanceDB index behind a thin wrapper that refuses chosen writes,
the embedder the real ONNX model behind one that refuses a marked text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragline.embed.base import Embedder, EmbeddingError, ModelFingerprint, Vectors
from ragline.engine import Ragline
from ragline.settings import Settings
from ragline.store.base import DocumentWrite, StoreError
from ragline.store.lance import LanceStore


class FlakyStore:
    """A real LanceStore whose batch writes fail: the first ``fail_first`` ones,
    and every one that holds a file named in ``refuse``."""

    def __init__(self, inner: LanceStore, *, fail_first: int = 0, refuse: str = "") -> None:
        self.inner = inner
        self.fail_first = fail_first
        self.refuse = refuse
        self.writes = 0

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        self.writes += 1
        if self.writes <= self.fail_first:
            raise StoreError(f"connection to the store lost (write {self.writes})")
        if self.refuse and any(self.refuse in w.record.source for w in items):
            raise StoreError("timed out writing the batch")
        self.inner.replace_documents(items)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MarkerFails:
    """The real embedder, failing every call that includes a text holding ``marker``
    (as a remote endpoint refuses one input it cannot take)."""

    def __init__(self, inner: Embedder, marker: str) -> None:
        self.inner = inner
        self.marker = marker
        self.fail = True

    @property
    def fingerprint(self) -> ModelFingerprint:
        return self.inner.fingerprint

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        if self.fail and any(self.marker in t for t in texts):
            raise EmbeddingError("HTTP 400 from the endpoint: input rejected")
        return self.inner.embed_documents(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


TOPICS = ["glaciers", "volcanoes", "tides", "deserts", "coral reefs", "monsoons"]


def corpus(root: Path) -> Path:
    root.mkdir()
    for i, topic in enumerate(TOPICS):
        (root / f"note-{i}.md").write_text(
            f"# Notes on {topic}\n\nField observations about {topic} at site {i}.\n"
        )
    return root


def open_rag(tmp_path: Path, embedder: Embedder, store: Any, **settings: Any) -> Ragline:
    s = Settings(index_dir=tmp_path / "index", ingest_store_backoff_s=0.01, **settings)
    return Ragline(s, embedder=embedder, store=store)


def lance(tmp_path: Path, embedder: Embedder) -> LanceStore:
    return LanceStore(tmp_path / "index" / "lance", dimension=embedder.dimension)


def sources(rag: Ragline) -> list[str]:
    return sorted(Path(r.source).name for r in rag.store.documents())


def test_a_refused_write_is_retried_then_succeeds(embedder: Embedder, tmp_path: Path) -> None:
    root = corpus(tmp_path / "c")
    store = FlakyStore(lance(tmp_path, embedder), fail_first=2)
    rag = open_rag(tmp_path, embedder, store)
    try:
        report = rag.ingest(root)
        assert report.failed == []
        assert len(report.indexed) == len(TOPICS)
        assert store.writes == 3  # two refused, the third written
        assert len(sources(rag)) == len(TOPICS)
        assert rag.search("volcanoes", mode="bm25").hits
    finally:
        rag.close()


def test_a_batch_that_keeps_failing_is_reported_and_the_run_goes_on(
    embedder: Embedder, tmp_path: Path
) -> None:
    root = corpus(tmp_path / "c")
    store = FlakyStore(lance(tmp_path, embedder), refuse="note-2.md")
    # one file per batch, so the refused batch holds note-2.md alone
    rag = open_rag(tmp_path, embedder, store, write_batch_chunks=1, ingest_store_retries=2)
    try:
        report = rag.ingest(root)
        assert [f.path for f in report.failed] == ["note-2.md"]
        reason = report.failed[0].reason
        assert "timed out writing the batch" in reason and "3 attempt(s)" in reason
        assert store.writes == len(TOPICS) + 2  # the refused batch was tried 3 times
        assert sorted(report.indexed) == [f"note-{i}.md" for i in range(6) if i != 2]
        assert sources(rag) == sorted(report.indexed)
        hits = rag.search("coral reefs", mode="bm25").hits
        assert hits and Path(hits[0].chunk.source).name == "note-4.md"
        assert not [h for h in rag.search("tides", mode="bm25").hits if "tides" in h.chunk.text]

        store.refuse = ""  # the store is back: the next run indexes the missing file
        again = rag.ingest(root)
        assert (again.failed, again.indexed) == ([], ["note-2.md"])
        assert len(sources(rag)) == len(TOPICS)
    finally:
        rag.close()


def test_a_chunk_the_embedder_refuses_is_left_out_alone(embedder: Embedder, tmp_path: Path) -> None:
    root = corpus(tmp_path / "c")
    sections = [
        "## Harbour\n\nThe harbour master logs every ferry that docks at the pier.",
        "## Lighthouse\n\nThe lighthouse lamp POISONPILL burns paraffin through the night.",
        "## Market\n\nThe fish market opens at dawn and sells herring and cod.",
    ]
    (root / "coast.md").write_text("# Coastal village\n\n" + "\n\n".join(sections) + "\n")
    faulty = MarkerFails(embedder, "POISONPILL")
    rag = open_rag(tmp_path, faulty, None, chunk_min_tokens=1)  # type: ignore[arg-type]
    try:
        report = rag.ingest(root)
        assert report.failed == []
        assert "coast.md" in report.indexed and len(report.indexed) == len(TOPICS) + 1
        warned = [w for w in report.warnings if w.path == "coast.md"]
        assert len(warned) == 1
        assert "Lighthouse" in warned[0].reason and "input rejected" in warned[0].reason
        stored = [
            c.text
            for batch, _ in rag.store.iter_chunks()
            for c in batch
            if c.source.endswith("coast.md")
        ]
        assert any("harbour master" in t for t in stored)
        assert any("fish market" in t for t in stored)
        assert not any("POISONPILL" in t for t in stored)
        assert (
            rag.search("fish market herring", mode="vector")
            .hits[0]
            .chunk.source.endswith("coast.md")
        )

        faulty.fail = False  # the endpoint takes it now: the next run adds the chunk
        again = rag.ingest(root)
        assert again.indexed == ["coast.md"] and again.chunks_embedded == 1
        stored = [c.text for batch, _ in rag.store.iter_chunks() for c in batch]
        assert any("POISONPILL" in t for t in stored)
    finally:
        rag.close()


def test_an_embedder_that_is_down_fails_files_whole_and_keeps_their_chunks(
    embedder: Embedder, tmp_path: Path
) -> None:
    root = corpus(tmp_path / "c")
    coast = root / "coast.md"
    coast.write_text(
        "# Coastal village\n\n## Harbour\n\nThe harbour master logs every ferry.\n\n"
        "## Market\n\nThe fish market opens at dawn.\n"
    )
    faulty = MarkerFails(embedder, "")  # "" is in every text: every call fails
    faulty.fail = False
    rag = open_rag(tmp_path, faulty, None, chunk_min_tokens=1)  # type: ignore[arg-type]
    try:
        assert rag.ingest(root).failed == []
        before = sorted(
            c.text for batch, _ in rag.store.iter_chunks() for c in batch if c.source == str(coast)
        )
        coast.write_text(coast.read_text() + "\n## Chapel\n\nThe chapel bell rings at noon.\n")
        (root / "new.md").write_text("# New\n\nA new note about the salt marsh.\n")
        faulty.fail = True
        report = rag.ingest(root)
        assert sorted(f.path for f in report.failed) == ["coast.md", "new.md"]
        assert all("embedding failed" in f.reason for f in report.failed)
        assert report.indexed == [] and report.warnings == []
        after = sorted(
            c.text for batch, _ in rag.store.iter_chunks() for c in batch if c.source == str(coast)
        )
        assert after == before  # not written with the new chunk missing
    finally:
        rag.close()


class FlakyReads:
    """A real LanceStore whose reads fail the first ``fail_first`` times each, as a
    remote store's do while it restarts: the records, the chunk count, the model,
    a document's chunks (read for their vectors)."""

    READS = ("documents", "info", "fingerprint", "chunks_by_index")

    def __init__(self, inner: LanceStore, *, fail_first: int) -> None:
        self.inner = inner
        self.fail_first = fail_first
        self.calls = dict.fromkeys(self.READS, 0)
        self.refused = dict.fromkeys(self.READS, 0)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.READS:
            return attr

        def read(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if self.refused[name] < self.fail_first:
                self.refused[name] += 1
                raise StoreError(f"connection refused ({name}, try {self.calls[name]})")
            return attr(*args, **kwargs)

        return read


def test_reads_at_ingest_start_are_retried_like_writes(embedder: Embedder, tmp_path: Path) -> None:
    """Issue 28: only batch writes were retried; the first read of an ingest (the
    stored records, the chunk count, the model) failed the run at once on a store
    that was restarting. Each read now gets the writes' retries and backoff."""
    root = corpus(tmp_path / "c")
    rag = open_rag(tmp_path, embedder, lance(tmp_path, embedder))
    rag.ingest(root)
    rag.close()
    (root / "note-1.md").write_text("# Notes on volcanoes\n\nA new eruption at site 1.\n")

    store = FlakyReads(lance(tmp_path, embedder), fail_first=2)
    rag = open_rag(tmp_path, embedder, store, ingest_store_retries=2)
    try:
        report = rag.ingest(root)
        assert report.failed == [] and report.indexed == ["note-1.md"]
        for name in ("documents", "info", "chunks_by_index"):
            assert store.refused[name] == 2 and store.calls[name] > 2, name
        hits = rag.search("new eruption", mode="bm25").hits
        assert hits and Path(hits[0].chunk.source).name == "note-1.md"
    finally:
        rag.close()

    store = FlakyReads(lance(tmp_path, embedder), fail_first=3)  # one more than retried
    rag = open_rag(tmp_path, embedder, store, ingest_store_retries=2)
    try:
        with pytest.raises(StoreError, match="connection refused"):
            rag.ingest(root)
    finally:
        rag.close()
