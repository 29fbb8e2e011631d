"""Stored conversations: SQLite next to the index, every read and write tenant-scoped.

A conversation id is random (not guessable), and every query also names the tenant,
so one tenant can neither read nor continue another's conversation: a lookup with
the wrong tenant finds nothing, exactly like an unknown id.
"""

from __future__ import annotations

import builtins
import json
import logging
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger("ragline.serve")

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    title TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conversations_tenant ON conversations (tenant, updated_at);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    query_id TEXT,
    answer_json TEXT
);
CREATE INDEX IF NOT EXISTS messages_conversation ON messages (conversation_id, seq);
"""

TITLE_CHARS = 80
#: Unsaved conversation ids remembered (oldest forgotten first): enough for the
#: exchanges in flight while the disk is full.
UNSAVED_KEPT = 1000


class NotSaved(Exception):
    """A conversation write failed (a full disk, an I/O error): the answer stands, the
    exchange is not kept, and the message says why without the file's path."""


def _not_saved(exc: sqlite3.Error) -> NotSaved:
    text = str(exc)
    why = "the disk is full" if "full" in text else f"its database cannot be written ({text})"
    log.warning("conversation not saved: %s", text)
    return NotSaved(f"this exchange was not saved to the conversation: {why}")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_id(prefix: str) -> str:
    """A random, URL-safe id (``conv_…``, ``msg_…``)."""
    return f"{prefix}_{secrets.token_hex(12)}"


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: str
    tenant: str
    title: str
    created_at: str
    updated_at: str
    messages: int


@dataclass(frozen=True, slots=True)
class StoredMessage:
    message_id: str
    role: str
    content: str
    created_at: str
    query_id: str | None
    answer: dict[str, Any] | None


class ConversationStore:
    """Conversations and their messages in one SQLite file (WAL; one connection, locked)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        #: Why conversations live in memory only ("" when they are kept in ``path``).
        self.not_kept = ""
        #: conversations whose creation failed (id → why), so adding to one says why
        self._unsaved: dict[str, str] = {}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
        except (OSError, sqlite3.OperationalError) as exc:
            # A read-only index (or a full disk) can still be searched: chat goes on,
            # its conversations kept in memory until the server stops, and said so.
            self.not_kept = f"{path} cannot be written ({exc})"
            log.warning("conversations are kept in memory only: %s", self.not_kept)
            self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)

    def create(self, tenant: str, title: str) -> Conversation:
        now = _now()
        cid = new_id("conv")
        title = " ".join(title.split())[:TITLE_CHARS]
        try:
            with self._lock:
                self._db.execute(
                    "INSERT INTO conversations VALUES (?, ?, ?, ?, ?)",
                    (cid, tenant, title, now, now),
                )
        except sqlite3.OperationalError as exc:
            # Answer all the same: adding to this id then says why it is not kept.
            why = str(_not_saved(exc))
            with self._lock:
                self._unsaved[cid] = why
                while len(self._unsaved) > UNSAVED_KEPT:
                    self._unsaved.pop(next(iter(self._unsaved)))
        return Conversation(cid, tenant, title, now, now, 0)

    def get(self, tenant: str, conversation_id: str) -> Conversation | None:
        with self._lock:
            row = self._db.execute(
                "SELECT c.id, c.tenant, c.title, c.created_at, c.updated_at, "
                "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
                "FROM conversations c WHERE c.id = ? AND c.tenant = ?",
                (conversation_id, tenant),
            ).fetchone()
        return Conversation(*row) if row else None

    def list(self, tenant: str, limit: int = 100) -> list[Conversation]:
        with self._lock:
            rows = self._db.execute(
                "SELECT c.id, c.tenant, c.title, c.created_at, c.updated_at, "
                "(SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) "
                "FROM conversations c WHERE c.tenant = ? ORDER BY c.updated_at DESC LIMIT ?",
                (tenant, limit),
            ).fetchall()
        return [Conversation(*r) for r in rows]

    def messages(
        self, tenant: str, conversation_id: str, last: int | None = None
    ) -> builtins.list[StoredMessage]:
        """The conversation's messages in order (only the ``last`` n when given)."""
        sql = (
            "SELECT id, role, content, created_at, query_id, answer_json FROM messages "
            "WHERE conversation_id = ? AND tenant = ? ORDER BY seq DESC"
        )
        params: tuple[Any, ...] = (conversation_id, tenant)
        if last is not None:
            sql += " LIMIT ?"
            params += (max(last, 0),)
        with self._lock:
            rows = self._db.execute(sql, params).fetchall()
        return [
            StoredMessage(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]) if r[5] else None)
            for r in reversed(rows)
        ]

    def add(
        self,
        tenant: str,
        conversation_id: str,
        role: str,
        content: str,
        *,
        query_id: str | None = None,
        answer: dict[str, Any] | None = None,
    ) -> str:
        """Append a message; the conversation must be the tenant's (else ``KeyError``);
        :class:`NotSaved` when the write fails."""
        mid = new_id("msg")
        now = _now()
        blob = json.dumps(answer, ensure_ascii=False) if answer is not None else None
        with self._lock:
            unsaved = self._unsaved.get(conversation_id)
        if unsaved is not None:
            raise NotSaved(unsaved)
        try:
            with self._lock:
                cur = self._db.execute(
                    "UPDATE conversations SET updated_at = ? WHERE id = ? AND tenant = ?",
                    (now, conversation_id, tenant),
                )
                if cur.rowcount != 1:
                    raise KeyError(conversation_id)
                self._db.execute(
                    "INSERT INTO messages (id, conversation_id, tenant, role, content, "
                    "created_at, query_id, answer_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (mid, conversation_id, tenant, role, content, now, query_id, blob),
                )
        except sqlite3.OperationalError as exc:
            raise _not_saved(exc) from exc
        return mid

    def delete(self, tenant: str, conversation_id: str) -> bool:
        with self._lock:
            cur = self._db.execute(
                "DELETE FROM conversations WHERE id = ? AND tenant = ?", (conversation_id, tenant)
            )
        return cur.rowcount == 1

    def close(self) -> None:
        with self._lock:
            self._db.close()
