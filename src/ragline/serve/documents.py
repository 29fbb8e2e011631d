"""Uploaded files: stored under a content-derived name, their client names kept as metadata.

An upload is written to ``<index_dir>/uploads/<tenant>/<sha256 of tenant+content><ext>``
and ingested from there as a one-file sync (which touches no other document). The
name the client sent is never part of a path; it is recorded here, with the
document id, so listings can show it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger("ragline.serve")

SCHEMA = """
CREATE TABLE IF NOT EXISTS uploads (
    doc_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    original_name TEXT NOT NULL,
    stored_name TEXT NOT NULL,
    size INTEGER NOT NULL,
    uploaded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS uploads_tenant ON uploads (tenant);
"""


@dataclass(frozen=True, slots=True)
class UploadRecord:
    doc_id: str
    tenant: str
    original_name: str
    stored_name: str
    size: int
    uploaded_at: str


class UploadRegistry:
    """Which documents came in through the API, under which client file name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        #: Why uploads and deletions are refused ("" when the folder can be written).
        self.read_only = ""
        path = root / "uploads.sqlite3"
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
        except (OSError, sqlite3.OperationalError) as exc:
            # A read-only index (or a full disk) is still served for search and
            # answers; the records are read as they are and writes get a 503.
            self.read_only = f"the index folder cannot be written ({exc})"
            log.warning("serving read-only: %s", self.read_only)
            target = f"file:{path}?immutable=1" if path.exists() else ":memory:"
            self._db = sqlite3.connect(
                target, uri=True, check_same_thread=False, isolation_level=None
            )
        self._db.execute("PRAGMA busy_timeout=5000")
        if not self.read_only or not path.exists():
            self._db.executescript(SCHEMA)

    def folder(self, tenant: str) -> Path:
        """The tenant's upload folder (tenant names are restricted to [A-Za-z0-9_.-])."""
        if not tenant or tenant in {".", ".."} or "/" in tenant or "\\" in tenant:
            raise ValueError(f"tenant {tenant!r} cannot name a folder")
        return self.root / tenant

    def record(self, rec: UploadRecord) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO uploads VALUES (?, ?, ?, ?, ?, ?)",
                (rec.doc_id, rec.tenant, rec.original_name, rec.stored_name, rec.size,
                 rec.uploaded_at),
            )  # fmt: skip

    def by_tenant(self, tenant: str) -> dict[str, UploadRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT doc_id, tenant, original_name, stored_name, size, uploaded_at "
                "FROM uploads WHERE tenant = ?",
                (tenant,),
            ).fetchall()
        return {r[0]: UploadRecord(*r) for r in rows}

    def forget(self, tenant: str, doc_id: str) -> UploadRecord | None:
        """Drop the record (and the stored file) of one of the tenant's uploads."""
        rec = self.by_tenant(tenant).get(doc_id)
        if rec is None:
            return None
        with self._lock:
            self._db.execute(
                "DELETE FROM uploads WHERE doc_id = ? AND tenant = ?", (doc_id, tenant)
            )
        (self.folder(tenant) / rec.stored_name).unlink(missing_ok=True)
        return rec

    def close(self) -> None:
        with self._lock:
            self._db.close()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
