"""Files that failed to parse, remembered by content hash, so a file that took
seconds to fail (a million nested HTML elements) is not parsed again on every run,
only once it changes (or the limits that judged it do)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "failed-files.json"


@dataclass(frozen=True, slots=True)
class Remembered:
    file_hash: str
    limits: str  # the settings the failure depended on, e.g. "max_file_bytes=…"
    reason: str
    line: int | None


class FailureMemory:
    """``<index>/failed-files.json``: source path → the failure of its content."""

    def __init__(self, folder: Path, tenant: str) -> None:
        self.path = folder / FILE_NAME
        self.tenant = tenant
        self._all: dict[str, dict[str, dict[str, object]]] = {}
        self._dirty = False
        try:
            loaded = json.loads(self.path.read_text())
            if isinstance(loaded, dict):
                self._all = loaded
        except (OSError, ValueError):
            self._all = {}

    def _mine(self) -> dict[str, dict[str, object]]:
        return self._all.setdefault(self.tenant, {})

    def recall(self, source: str, file_hash: str, limits: str) -> Remembered | None:
        got = self._mine().get(source)
        if not got or got.get("hash") != file_hash or got.get("limits") != limits:
            return None
        line = got.get("line")
        return Remembered(
            file_hash,
            limits,
            str(got.get("reason", "")),
            int(line) if isinstance(line, int) else None,
        )

    def remember(self, source: str, failure: Remembered) -> None:
        self._mine()[source] = {
            "hash": failure.file_hash,
            "limits": failure.limits,
            "reason": failure.reason,
            "line": failure.line,
        }
        self._dirty = True

    def forget(self, source: str) -> None:
        if self._mine().pop(source, None) is not None:
            self._dirty = True

    def save(self) -> None:
        """Write the file (atomically) if anything changed; a failure to write only
        means the files are parsed again next time."""
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}")
            tmp.write_text(json.dumps(self._all, indent=1, sort_keys=True))
            tmp.replace(self.path)
            self._dirty = False
        except OSError:
            return
