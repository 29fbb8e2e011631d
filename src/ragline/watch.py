"""`ragline watch PATH`: keep the index in line with a folder as files change.

File events come from ``watchfiles`` (inotify, FSEvents, ReadDirectoryChangesW;
polling elsewhere). Events are gathered until the folder has been quiet for
:data:`QUIET_MS` (an editor's save is a burst: temp file, rename, chmod), at most
``watch_debounce_ms``, and then the whole folder is synced once. A full sync is
what makes every case right (added, changed, deleted, renamed, a folder moved
away), and it is cheap: unchanged files are only hashed (17 ms for the 192 files
of d2l-en, README "Measured"), and only changed chunks are embedded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from watchfiles import Change, watch

from ragline.engine import Ragline
from ragline.ingest.ignore import IGNORE_FILE
from ragline.ingest.report import IngestReport

#: Quiet time (ms) that ends a burst of events: watchfiles' own default step.
QUIET_MS = 50
#: Wait (ms) for a first event before the initial sync starts (and the stop check).
STARTUP_MS = 200


@dataclass(frozen=True, slots=True)
class ChangeCount:
    added: int = 0
    modified: int = 0
    deleted: int = 0

    def __str__(self) -> str:
        return f"+{self.added} ~{self.modified} -{self.deleted}"


@dataclass(frozen=True, slots=True)
class SyncEvent:
    """One re-index: the events that caused it, its report, and how long it took."""

    changes: ChangeCount
    report: IngestReport | None  # None when the sync failed (see error)
    seconds: float
    error: str = ""


def relevant(
    change: Change, path: str, root: Path, extensions: Iterable[str], index_dir: Path
) -> bool:
    """Does this event concern an ingested file (pure)? Hidden files and folders and
    the index itself are ignored, as ingest ignores them (but not the root's
    .raglineignore, whose rules each sync reads); a deletion always counts
    (a deleted folder may be reported by its own path, which has no suffix)."""
    p = Path(path)
    try:
        rel = p.relative_to(root)
    except ValueError:
        return False
    if p == index_dir or index_dir in p.parents:
        return False
    if rel.as_posix() == IGNORE_FILE:  # new exclusion rules: the next sync applies them
        return True
    if any(part.startswith(".") for part in rel.parts):
        return False
    if change is Change.deleted:
        return True
    return p.suffix.lower() in {e.lower() for e in extensions}


def count(changes: Iterable[tuple[Change, str]]) -> ChangeCount:
    kinds = [c for c, _ in changes]
    return ChangeCount(
        kinds.count(Change.added), kinds.count(Change.modified), kinds.count(Change.deleted)
    )


def watch_folder(
    rag: Ragline,
    root: Path,
    *,
    tenant: str | None = None,
    on_sync: Callable[[SyncEvent], None],
    stop: threading.Event | None = None,
    debounce_ms: int | None = None,
) -> None:
    """Sync ``root`` now, then after every burst of relevant file events, until
    ``stop`` is set (or Ctrl-C). A failing sync is reported and watching goes on."""
    root = root.resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder (ragline watch needs a folder)")
    settings = rag.settings
    index_dir = settings.index_dir.resolve()
    extensions = tuple(settings.extensions)
    debounce = settings.watch_debounce_ms if debounce_ms is None else debounce_ms

    def sync(changes: ChangeCount) -> None:
        started = time.perf_counter()
        try:
            report = rag.ingest(root, tenant=tenant)
        except Exception as e:  # the store may be busy or gone; keep watching
            on_sync(SyncEvent(changes, None, time.perf_counter() - started, str(e)))
            return
        on_sync(SyncEvent(changes, report, time.perf_counter() - started))

    # The first (empty) batch comes once the watcher runs: the initial sync happens
    # then, so a file saved during it is caught by the next batch, never lost.
    started = False
    for batch in watch(
        root,
        watch_filter=lambda change, path: relevant(change, path, root, extensions, index_dir),
        debounce=max(debounce, QUIET_MS),
        step=QUIET_MS,
        stop_event=stop,
        raise_interrupt=False,
        rust_timeout=STARTUP_MS,
        yield_on_timeout=True,
    ):
        if not started:
            started = True
            sync(count(batch))
        elif batch:
            sync(count(batch))
