"""The index report: what an ingest run did, printed and saved as JSON."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class FileFailure:
    path: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


@dataclass(slots=True)
class ChapterCount:
    files: int = 0
    chunks: int = 0
    tokens: int = 0


@dataclass(slots=True)
class IngestReport:
    """Counts of one run. ``files`` = discovered; the rest partition what happened."""

    root: str
    tenant: str
    chunker: str
    model: str
    files: int = 0
    #: files and folders ("name/") left out by --exclude / .raglineignore, not counted in files
    excluded: list[str] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)  # new or changed, written
    skipped: list[str] = field(default_factory=list)  # unchanged content hash
    deleted: list[str] = field(default_factory=list)  # gone from disk, removed from the index
    failed: list[FileFailure] = field(default_factory=list)
    #: indexed anyway, but worth fixing (a skipped heading level), with file and line
    warnings: list[FileFailure] = field(default_factory=list)
    chunks: int = 0  # chunks written this run
    chunks_embedded: int = 0  # of those, vectors computed
    chunks_reused: int = 0  # of those, vectors reused (content unchanged)
    tokens: int = 0  # tokens in chunks written this run
    per_chapter: dict[str, ChapterCount] = field(default_factory=dict)
    index_chunks: int = 0  # chunks of this tenant in the index after the run
    seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)  # read, parse, embed, write, …
    crawl: dict[str, Any] = field(default_factory=dict)  # web ingests: fetched, unchanged (304), …
    #: sources whose chunks had no document record (left by a crash) and were removed
    orphans_removed: list[str] = field(default_factory=list)
    #: RAGLINE_EMBEDDER=auto on a new index: which model was chosen and why (else "")
    model_choice: str = ""
    #: stopped early (Ctrl-C): the files in ``indexed`` are written, the rest are left
    #: for the next run; nothing was deleted
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed

    def add_stage(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = self.stage_seconds.get(stage, 0.0) + seconds

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failed"] = [asdict(f) for f in self.failed]
        d["warnings"] = [asdict(w) for w in self.warnings]
        d["per_chapter"] = {k: asdict(v) for k, v in sorted(self.per_chapter.items())}
        d["seconds"] = round(self.seconds, 3)
        d["stage_seconds"] = {k: round(v, 3) for k, v in self.stage_seconds.items()}
        return d

    def save(self, folder: Path) -> Path:
        """Write ``last-ingest.json`` atomically (a crash never leaves half a file)."""
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "last-ingest.json"
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".report-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2, ensure_ascii=False)
        os.replace(tmp, target)
        return target
