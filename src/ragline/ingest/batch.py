"""Prepared documents gathered into batches: once a batch holds enough chunks to
embed, their missing vectors are embedded together and the documents written in
one atomic replace, retried after a store error; a batch that still fails is
reported under its files and the run goes on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ragline.embed.base import Embedder
from ragline.ingest.embedding import BatchEmbedder
from ragline.ingest.prepare import Pending
from ragline.ingest.progress import Tally
from ragline.ingest.report import ChapterCount, FileFailure, IngestReport
from ragline.settings import Settings
from ragline.store.base import DocumentWrite, ModelMismatchError, Store, StoreError
from ragline.store.retrying import call_with_retry


@dataclass(slots=True)
class Batch:
    """The documents of one run waiting to be embedded and written together.

    ``before_write`` is called before each write (the run records a model it chose
    on no sample there)."""

    store: Store
    embedder: Embedder
    settings: Settings
    report: IngestReport
    tally: Tally
    stop: threading.Event | None
    before_write: Callable[[], None]
    pending: list[Pending] = field(default_factory=list, init=False)
    new: int = field(default=0, init=False)  # their chunks with no stored vector yet

    def add(self, item: Pending) -> None:
        """Add a prepared document; once the batch holds
        ``RAGLINE_WRITE_BATCH_CHUNKS`` chunks to embed, embed and write it."""
        self.pending.append(item)
        new = sum(v is None for v in item.vectors)
        self.new += new
        self.tally.chunks_to_embed += new
        if self.new >= self.settings.write_batch_chunks:
            self.flush()

    def flush(self) -> None:
        """Embed what is missing across all pending files, then write them together."""
        pending, self.pending, self.new = self.pending, [], 0
        if not pending:
            return
        report = self.report
        missing = {id(p): sum(v is None for v in p.vectors) for p in pending}
        if any(missing.values()):
            t0 = time.perf_counter()
            embedding = BatchEmbedder(self.embedder, self.settings, self.tally, self.stop)
            failed = embedding.embed_missing([p for p in pending if missing[id(p)]], report)
            report.add_stage("embed", time.perf_counter() - t0)
            pending = [p for p in pending if id(p) not in failed]
            if not pending:
                return
        t0 = time.perf_counter()
        dim = self.embedder.dimension
        writes = [
            DocumentWrite(
                record=p.record,
                chunks=p.chunks,
                vectors=np.vstack([v for v in p.vectors if v is not None]).astype(
                    np.float32, copy=False
                )
                if p.vectors
                else np.zeros((0, dim), np.float32),
            )
            for p in pending
        ]
        self.before_write()
        written = self._write(writes, [p.rel for p in pending])
        report.add_stage("write", time.perf_counter() - t0)
        if not written:
            return
        for p in pending:
            report.indexed.append(p.rel)
            report.chunks += len(p.chunks)
            report.chunks_embedded += missing[id(p)] - p.dropped
            report.tokens += p.record.token_count
            count_chapter(report, p.record.chapter, len(p.chunks), p.record.token_count)
        report.chunks_reused = report.chunks - report.chunks_embedded

    def _write(self, writes: list[DocumentWrite], names: list[str]) -> bool:
        """Write one batch, retried with backoff after a store error
        (``RAGLINE_INGEST_STORE_RETRIES``). A batch that still fails is reported
        under each of its files and False returned, so the run goes on: the write
        is one atomic replace, so the files keep what was stored before, and
        without a new record they are indexed again by the next run."""
        retries = self.settings.ingest_store_retries
        try:
            call_with_retry(
                lambda: self.store.replace_documents(writes),
                retries=retries,
                backoff_s=self.settings.ingest_store_backoff_s,
            )
        except ModelMismatchError:
            raise
        except (StoreError, OSError) as e:
            reason = (
                f"store write failed after {retries + 1} attempt(s) "
                f"(RAGLINE_INGEST_STORE_RETRIES): {e}; the next run tries again"
            )
            self.report.failed.extend(FileFailure(name, reason) for name in names)
            return False
        return True


def count_chapter(report: IngestReport, chapter: str, chunks: int, tokens: int) -> None:
    """Add one file to its chapter's counts in the report."""
    c = report.per_chapter.setdefault(chapter, ChapterCount())
    c.files += 1
    c.chunks += chunks
    c.tokens += tokens
