"""What the last crawl learnt about each URL, so the next one can ask "changed?".

One SQLite file in the index folder (``web.sqlite3``): per tenant and fetched URL,
the validators (ETag, Last-Modified), the canonical URL the page was indexed
under, the hash of its content and its links (a page answered 304 has no body,
yet the crawl must still follow its links).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ragline.ingest.web.fetch import Validators

CACHE_FILE = "web.sqlite3"

_SCHEMA = """CREATE TABLE IF NOT EXISTS pages (
    tenant TEXT NOT NULL,
    url TEXT NOT NULL,
    source TEXT NOT NULL,
    etag TEXT NOT NULL,
    last_modified TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    links TEXT NOT NULL,
    fetched_at TEXT NOT NULL,
    PRIMARY KEY (tenant, url)
)"""


@dataclass(frozen=True, slots=True)
class CachedPage:
    url: str
    source: str  # the canonical URL: the document's identity
    validators: Validators
    content_hash: str
    links: tuple[str, ...]


class PageCache:
    def __init__(self, index_dir: Path) -> None:
        index_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            index_dir / CACHE_FILE, timeout=5.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(_SCHEMA)

    def get(self, tenant: str, url: str) -> CachedPage | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT source, etag, last_modified, content_hash, links FROM pages "
                "WHERE tenant = ? AND url = ?",
                (tenant, url),
            ).fetchone()
        if row is None:
            return None
        links = tuple(str(u) for u in json.loads(row[4]))
        return CachedPage(url, str(row[0]), Validators(row[1], row[2]), str(row[3]), links)

    def put(self, tenant: str, page: CachedPage) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tenant,
                    page.url,
                    page.source,
                    page.validators.etag,
                    page.validators.last_modified,
                    page.content_hash,
                    json.dumps(list(page.links)),
                    datetime.now(UTC).isoformat(timespec="seconds"),
                ),
            )

    def forget(self, tenant: str, url: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM pages WHERE tenant = ? AND url = ?", (tenant, url))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
