"""How far a sync has got, counted in chunks embedded, and whom to tell."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """Where a sync stands, counted in what costs time: chunks embedded out of the
    chunks to embed. That total is only known as files are chunked, so it grows
    with ``files_done``; rate and ETA come from the embedding speed measured so far
    (bytes read said nothing: reading is fast, embedding is the wait)."""

    files_done: int  # files chunked (or failed) so far
    files_total: int  # files to index this run
    chunks_embedded: int
    chunks_to_embed: int  # known so far
    embed_seconds: float  # time spent in the embedder so far
    current: str  # the file handled last

    @property
    def rate(self) -> float | None:
        """Chunks embedded per second so far; None before the first batch."""
        if not self.chunks_embedded or self.embed_seconds <= 0:
            return None
        return self.chunks_embedded / self.embed_seconds

    @property
    def eta_seconds(self) -> float | None:
        """Embedding time left for the chunks known so far, at the measured rate."""
        rate = self.rate
        return None if rate is None else (self.chunks_to_embed - self.chunks_embedded) / rate


#: progress(event): called after each file is chunked and each batch is embedded.
ProgressCallback = Callable[[IngestProgress], None]


@dataclass(slots=True)
class Tally:
    """The running counts behind :class:`IngestProgress`, and whom to tell."""

    callback: ProgressCallback | None
    files_total: int
    files_done: int = 0
    chunks_embedded: int = 0
    chunks_to_embed: int = 0
    embed_seconds: float = 0.0
    current: str = ""

    def tell(self) -> None:
        if self.callback is not None:
            self.callback(
                IngestProgress(
                    self.files_done,
                    self.files_total,
                    self.chunks_embedded,
                    self.chunks_to_embed,
                    self.embed_seconds,
                    self.current,
                )
            )

    def file_done(self, name: str) -> None:
        """One event per file, once it is handled (its batch written, if it closed one)."""
        self.files_done += 1
        self.current = name
        self.tell()
