"""What a sync will do, decided from hashes alone: which files are new or changed,
which are unchanged, which records lost their file (pure, no store, no parsing)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragline.types import DocumentRecord, ParsedDocument


@dataclass(frozen=True, slots=True)
class FileState:
    path: Path
    source: str  # canonical absolute POSIX path: the document's identity
    size: int
    file_hash: str


@dataclass(frozen=True, slots=True)
class SourcedDocument:
    """A document that is not a file (a fetched web page): its identity, the hash of
    its content, and how to parse it (called only when the content changed)."""

    source: str
    content_hash: str
    size: int
    parse: Callable[[], ParsedDocument]
    chapter: str = ""


@dataclass(slots=True)
class SyncPlan:
    """What a run will do, decided from hashes alone (pure; see :func:`plan_sync`)."""

    to_index: list[FileState] = field(default_factory=list)
    unchanged: list[FileState] = field(default_factory=list)
    to_delete: list[DocumentRecord] = field(default_factory=list)


def plan_sync(current: Sequence[FileState], indexed: dict[str, DocumentRecord]) -> SyncPlan:
    """Split files into new-or-changed and unchanged; records whose file is gone
    are to delete. ``indexed`` holds only the records under the run's root."""
    plan = SyncPlan()
    seen: set[str] = set()
    for f in current:
        seen.add(f.source)
        rec = indexed.get(f.source)
        if rec is not None and rec.file_hash == f.file_hash:
            plan.unchanged.append(f)
        else:
            plan.to_index.append(f)
    plan.to_delete = [r for s, r in sorted(indexed.items()) if s not in seen]
    return plan


def no_documents_hint(extensions: Sequence[str], excluded: Sequence[str]) -> str:
    """Why a run found nothing to read: which files it looks for and what it skips,
    so an empty or wrong folder is not mistaken for a successful ingest."""
    left_out = (
        f"; {len(excluded)} path(s) left out by --exclude / .raglineignore / RAGLINE_EXCLUDE"
        if excluded
        else ""
    )
    return (
        f"no documents found: ragline reads {' '.join(extensions)} files (RAGLINE_EXTENSIONS); "
        f"hidden files and folders are skipped{left_out}"
    )


def in_scope(source: str, root: Path) -> bool:
    """Is an indexed path under this run's root (so its absence means deletion)?"""
    r = root.as_posix()
    return source == r or source.startswith(r.rstrip("/") + "/")


def relative(path: Path, base: Path) -> str:
    """``path`` below ``base`` as POSIX text; the whole path when it is not below."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
