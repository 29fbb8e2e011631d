"""One ingest at a time per index: an exclusive lock on ``<index_dir>/ingest.lock``.

Two ``ragline ingest`` runs on one index would each find every file new, embed
everything twice and race on the same documents' rows. The second one now stops at
once, naming the process that holds the index, instead. The lock is an advisory
``flock`` on an open file, so the kernel drops it when its holder exits, even on
``kill -9``: a crashed ingest never leaves a stale lock behind. The file keeps the
holder's pid, for the message only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ragline.errors import FaultError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, no lock
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "ingest.lock"


class IngestLockedError(FaultError):
    """Another process is ingesting into this index; try again when it is done."""


@contextmanager
def ingest_lock(index_dir: Path) -> Iterator[None]:
    """Hold ``index_dir``'s ingest lock for the block, or raise
    :class:`IngestLockedError` at once when another process holds it."""
    index_dir.mkdir(parents=True, exist_ok=True)
    path = index_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                raise IngestLockedError(
                    f"another ingest is running on this index ({index_dir}, pid {holder}); "
                    "wait for it to finish, then run this one again"
                ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
