"""API keys: random bearer tokens mapped to a tenant, stored only as SHA-256 hashes.

A key reads ``rl_<key_id>_<secret>``: the ``rl_`` prefix makes a leaked key easy
to recognise (secret scanners, logs), the key id finds its row without scanning,
and the 256-bit secret makes a plain SHA-256 at rest enough (no password
stretching is needed for random keys). The stored hash is compared with
:func:`hmac.compare_digest`. Keys live in ``<index_dir>/keys.sqlite3`` (mode
0600); ``ragline keys create|list|revoke`` manages them, and a revocation is seen
by a running server on its next request.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ragline.settings import StoreSettings

KEYS_FILE = "keys.sqlite3"
KEY_PREFIX = "rl_"
_KEY_RE = re.compile(r"^rl_([0-9a-f]{16})_([A-Za-z0-9_\-]{43,})$")
#: Tenant names become folder names (uploads): "." and ".." are refused.
_TENANT_RE = re.compile(r"^(?!\.\.?$)[A-Za-z0-9_.\-]{1,128}$")
MAX_NAME_CHARS = 200

_SCHEMA_VERSION = 1
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS api_keys (
        key_id TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL UNIQUE,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys (tenant)",
)


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """What may be shown about a key: everything but the key itself."""

    key_id: str
    tenant: str
    name: str
    created_at: str
    revoked_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def hash_key(key: str) -> str:
    """SHA-256 of a key, as stored."""
    return hashlib.sha256(key.encode()).hexdigest()


def parse_key(key: str) -> str | None:
    """The key id of a well-formed key, else None."""
    m = _KEY_RE.match(key.strip())
    return m.group(1) if m else None


def keys_path(settings: StoreSettings) -> Path:
    return Path(settings.index_dir) / KEYS_FILE


class KeyStore:
    """API keys in one SQLite file; safe to share between threads and processes.

    ``KeyStore(path)`` or ``KeyStore(settings)`` (then ``<index_dir>/keys.sqlite3``).
    """

    def __init__(self, where: Path | str | StoreSettings) -> None:
        self.path = keys_path(where) if isinstance(where, StoreSettings) else Path(where)
        if self.path.is_dir():
            raise ValueError(f"{self.path} is a directory, not a key store file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # hashes only, but still nobody else's business
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=5.0, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if version > _SCHEMA_VERSION:
                raise ValueError(
                    f"{self.path}: key store schema {version} is newer than this ragline"
                )
            for stmt in _SCHEMA:
                self._conn.execute(stmt)
            self._conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        except BaseException:
            self._conn.close()
            raise

    def create(self, tenant: str, name: str = "") -> tuple[str, str]:
        """Make a key for ``tenant``; returns ``(key_id, key)``. The key is not kept."""
        if not _TENANT_RE.match(tenant):
            raise ValueError(
                f"tenant {tenant!r}: use 1-128 letters, digits, '_', '.' or '-' "
                "(not '.' or '..' alone)"
            )
        if len(name) > MAX_NAME_CHARS:
            raise ValueError(f"key name is {len(name)} characters; at most {MAX_NAME_CHARS}")
        key_id = secrets.token_hex(8)
        key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        with self._lock:
            self._conn.execute(
                "INSERT INTO api_keys (key_id, key_hash, tenant, name, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (key_id, hash_key(key), tenant, name, _now()),
            )
        return key_id, key

    def tenant_for(self, key: str) -> str | None:
        """The tenant of an active key; None for a malformed, unknown or revoked one."""
        key_id = parse_key(key)
        if key_id is None:
            return None
        with self._lock:
            row = self._conn.execute(
                "SELECT key_hash, tenant, revoked_at FROM api_keys WHERE key_id = ?", (key_id,)
            ).fetchone()
        if row is None:
            # Same work as a hit, so the answer's timing does not tell ids apart.
            hmac.compare_digest(hash_key(key), "0" * 64)
            return None
        stored, tenant, revoked_at = row
        if not hmac.compare_digest(hash_key(key.strip()), str(stored)) or revoked_at is not None:
            return None
        return str(tenant)

    def revoke(self, key_id: str) -> bool:
        """Revoke a key; False when no active key has this id."""
        with self._lock:
            cur = self._conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
                (_now(), key_id),
            )
        return cur.rowcount == 1

    def list(self, tenant: str | None = None) -> list[ApiKeyInfo]:
        """Keys (revoked ones included), oldest first, optionally of one tenant."""
        sql = "SELECT key_id, tenant, name, created_at, revoked_at FROM api_keys"
        args: tuple[str, ...] = ()
        if tenant is not None:
            sql += " WHERE tenant = ?"
            args = (tenant,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created_at, key_id", args).fetchall()
        return [
            ApiKeyInfo(str(r[0]), str(r[1]), str(r[2]), str(r[3]), _opt_str(r[4])) for r in rows
        ]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _opt_str(v: object) -> str | None:
    return None if v is None else str(v)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def bearer_key(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key a request carries: ``Authorization: Bearer <key>`` or ``X-API-Key``."""
    if authorization:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    if x_api_key and x_api_key.strip():
        return x_api_key.strip()
    return None
