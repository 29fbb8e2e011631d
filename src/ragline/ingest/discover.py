"""Find the files an ingest run covers."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def discover_files(root: Path, extensions: Iterable[str]) -> list[Path]:
    """Supported files under ``root`` (or ``root`` itself), sorted, absolute.

    Hidden files and folders (``.git``, the ``.ragline`` index itself) are
    skipped; symlinked folders are not followed, so a link loop cannot hang a run.
    """
    exts = {e.lower() for e in extensions}
    root = root.resolve()
    if root.is_file():
        return [root] if root.suffix.lower() in exts else []
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such file or folder")
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in filenames:
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            if path.suffix.lower() in exts and path.is_file():
                found.append(path)
    return sorted(found)


def chapter_of(path: Path, root: Path) -> str:
    """The first folder under the ingest root, which is how books and doc sites
    group chapters; files at the top level get '' (the caller uses the title)."""
    try:
        rel = path.relative_to(root if root.is_dir() else root.parent)
    except ValueError:
        return ""
    return rel.parts[0] if len(rel.parts) > 1 else ""
