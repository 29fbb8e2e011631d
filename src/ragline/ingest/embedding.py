"""The missing vectors of a batch of prepared documents, embedded so that one bad
chunk costs only itself: a failing call is halved until the failing chunks are
alone, each call runs under a time limit, and its vectors are checked for shape
and finite values. A stop (Ctrl-C) is seen within one wait step."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace

import numpy as np

from ragline.embed.base import Embedder, EmbeddingError, Vectors
from ragline.ingest.prepare import Pending
from ragline.ingest.progress import Tally
from ragline.ingest.report import FileFailure, IngestReport
from ragline.settings import Settings

#: Prefix of the recorded hash of a file written without some of its chunks: it
#: matches no file's hash, so the next run indexes the file again (reusing the
#: stored vectors) and tries the left-out chunks once more.
PARTIAL_HASH = "partial:"


class _Stopped(Exception):
    """The run was asked to stop (Ctrl-C) while an embedding call was running."""


@dataclass(slots=True)
class _EmbedRun:
    """What the halving of one batch found: the chunks that failed alone (keyed
    by file id and chunk position, with the error), and whether the embedder
    looks down (two chunks failed alone before any call succeeded), in which case
    the halving stops and the files behind the failures fail whole."""

    rejected: dict[tuple[int, int], str] = field(default_factory=dict)
    succeeded: bool = False
    down: str | None = None


@dataclass(slots=True)
class BatchEmbedder:
    """Fills in the ``None`` vectors of pending documents, counting in ``tally``."""

    embedder: Embedder
    settings: Settings
    tally: Tally
    stop: threading.Event | None = None

    def embed_missing(self, group: list[Pending], report: IngestReport) -> set[int]:
        """Embed the missing vectors of ``group``'s files, halving the batch on an
        embedding error until the failing chunks are alone, so only they are left
        out (each named in the report's warnings; its file is recorded as partial).
        A file left with no chunk, or whose chunks failed while the embedder
        looked down, fails whole (named in the report) and keeps its previous
        chunks. Returns the ids of the files that failed."""
        todo = [(p, i) for p in group for i, v in enumerate(p.vectors) if v is None]
        run = _EmbedRun()
        size = self._call_chunks()
        try:
            for start in range(0, len(todo), size):
                if self._stopping():
                    raise _Stopped
                self._embed_halving(todo[start : start + size], run)
        except _Stopped:
            # left whole for the next run, neither written nor failed: the files
            # embedded completely are written by the caller
            return {id(p) for p in group if any(v is None for v in p.vectors)}
        failed: set[int] = set()
        for p in group:
            lost = [i for i, v in enumerate(p.vectors) if v is None]
            if not lost:
                continue
            self.tally.chunks_to_embed -= len(lost)  # they will not be embedded now
            if run.down is not None or len(lost) == len(p.chunks):
                reason = run.down or run.rejected[(id(p), lost[0])]
                report.failed.append(FileFailure(p.rel, f"embedding failed: {reason}"))
                failed.add(id(p))
                continue
            for i in lost:
                c = p.chunks[i]
                where = f"page {c.page}, " if c.page is not None else ""
                report.warnings.append(
                    FileFailure(
                        p.rel,
                        f"chunk {c.chunk_index + 1} of {len(p.chunks)} ({where}section "
                        f"{c.section or c.title!r}) left out: embedding failed: "
                        f"{run.rejected[(id(p), i)]}; the next run tries it again",
                    )
                )
            _drop_chunks(p, lost)
        if run.rejected or run.down is not None:
            self.tally.tell()
        return failed

    def _embed_halving(self, items: list[tuple[Pending, int]], run: _EmbedRun) -> None:
        """Embed the chunks ``items`` name in one call; when it fails, embed each
        half, down to single chunks (recorded in ``run.rejected``)."""
        if not items or run.down is not None:
            return
        t0 = time.perf_counter()
        try:
            vecs = self._embed_checked([p.chunks[i].embed_text for p, i in items])
        except EmbeddingError as e:
            self.tally.embed_seconds += time.perf_counter() - t0
            if len(items) == 1:
                p, i = items[0]
                run.rejected[(id(p), i)] = str(e)
                if not run.succeeded and len(run.rejected) >= 2:
                    run.down = str(e)  # not one bad chunk: no call has worked at all
                return
            half = len(items) // 2
            self._embed_halving(items[:half], run)
            self._embed_halving(items[half:], run)
            return
        run.succeeded = True
        for (p, i), v in zip(items, vecs, strict=True):
            p.vectors[i] = v
        self.tally.embed_seconds += time.perf_counter() - t0
        self.tally.chunks_embedded += len(items)
        self.tally.tell()

    def _embed_checked(self, texts: list[str]) -> Vectors:
        """The embedder's vectors, within the time limit, with the right shape and
        finite values (a NaN would poison every search that touches the chunk)."""
        limit = self.settings.embed_timeout_per_100_s * max(1, -(-len(texts) // 100))
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragline-embed")
        try:
            future = pool.submit(self.embedder.embed_documents, texts)
            deadline = time.monotonic() + limit
            while True:  # waited for in steps, so a stop is seen within one
                if self._stopping():
                    raise _Stopped
                try:
                    vecs = future.result(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
                    break
                except FutureTimeout:
                    if time.monotonic() >= deadline:
                        raise
        except FutureTimeout:
            raise EmbeddingError(
                f"no vectors for {len(texts)} chunks within {limit:.0f} s "
                "(RAGLINE_EMBED_TIMEOUT_PER_100_S)"
            ) from None
        finally:
            pool.shutdown(wait=False)
        expected = (len(texts), self.embedder.dimension)
        if tuple(vecs.shape) != expected:
            raise EmbeddingError(
                f"the model returned vectors of shape {vecs.shape}, not {expected}"
            )
        if not np.isfinite(vecs).all():
            raise EmbeddingError("the model returned NaN or infinite values")
        return vecs

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _call_chunks(self) -> int:
        """Chunks per embedding call: a stop abandons at most one call's work."""
        configured = self.settings.ingest_embed_call_chunks
        if configured:
            return configured
        return self.settings.embed_batch_size * (self.settings.embed_threads or os.cpu_count() or 1)


def _drop_chunks(p: Pending, lost: Sequence[int]) -> None:
    """Leave chunks out of a pending file: its record counts what is written, and
    its hash is marked partial so the next run indexes the file again."""
    gone = set(lost)
    keep = [k for k in range(len(p.chunks)) if k not in gone]
    p.chunks = [p.chunks[k] for k in keep]
    p.vectors = [p.vectors[k] for k in keep]
    p.dropped = len(gone)
    p.record = replace(
        p.record,
        chunk_count=len(p.chunks),
        token_count=sum(c.token_count for c in p.chunks),
        file_hash=PARTIAL_HASH + p.record.file_hash,
    )
