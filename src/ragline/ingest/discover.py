"""Find the files an ingest run covers."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ragline.ingest.ignore import IgnoreRules
from ragline.validation import is_unicode

_NOT_UTF8_FILE = "file name is not valid UTF-8 (shown escaped); rename the file to index it"
_NOT_UTF8_FOLDER = "folder name is not valid UTF-8 (shown escaped); its files are not read"


@dataclass(slots=True)
class Discovery:
    """The files a run reads, and the entries named like documents that cannot be
    read as files (a FIFO, a socket, a symlink loop, a broken link, a link out of
    the root, a name that is not UTF-8), with why."""

    files: list[Path] = field(default_factory=list)
    rejected: list[tuple[Path, str]] = field(default_factory=list)
    #: files and folders (ending in "/") left out by the ignore rules, relative
    excluded: list[str] = field(default_factory=list)


def resolved(path: Path) -> Path:
    """``path`` made absolute with links resolved; a link loop stays as named."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return path.absolute()


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a document, or None for a regular file.

    A FIFO is never opened: reading one blocks until a writer comes."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "symbolic link loop"
        if e.errno == errno.ENOENT and path.is_symlink():
            return "broken symbolic link"
        return f"cannot read: {e.strerror or e}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe), not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a regular file"
    return "not a regular file"


def escaped(name: str) -> str:
    """A file name as text that can be stored and printed: bytes that are not
    UTF-8 (kept by Python as surrogates) shown as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def outside_link(path: Path, root: Path) -> str | None:
    """Why a symbolic link ``path`` may not be read: it leads outside ``root`` (a
    link to /etc/passwd must not make that file searchable); None when it stays
    inside or is no link. ``root`` is resolved."""
    if not path.is_symlink():
        return None
    target = resolved(path)
    if target == root or root in target.parents:
        return None
    return "symbolic link to a file outside the ingested folder (not followed)"


def discover(root: Path, extensions: Iterable[str], ignore: IgnoreRules | None = None) -> Discovery:
    """Supported files under ``root`` (or ``root`` itself), sorted, absolute.

    Hidden files and folders (``.git``, the ``.ragline`` index itself) are
    skipped; symlinked folders are not followed, so a link loop cannot hang a run;
    a linked file is read only when its target is inside ``root`` too.
    ``ignore`` (``--exclude``, ``.raglineignore``) prunes matching folders and
    files of a folder root; what it leaves out is listed in ``excluded``.
    Raises FileNotFoundError only when ``root`` does not exist at all.
    """
    exts = {e.lower() for e in extensions}
    out = Discovery()
    if not os.path.lexists(root):
        raise FileNotFoundError(f"{root}: no such file or folder")
    root = resolved(root)
    if not is_unicode(str(root)):  # every document under it would carry the name
        out.rejected.append((root, "path is not valid UTF-8 (shown escaped); rename it"))
        return out
    if not root.is_dir():
        if root.suffix.lower() in exts:
            problem = not_a_file(root)
            if problem is None:
                out.files.append(root)
            else:
                out.rejected.append((root, problem))
        return out
    pruning = ignore is not None and not ignore.empty
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in dirnames:
            if not d.startswith(".") and not is_unicode(d):
                out.rejected.append((Path(dirpath) / d, _NOT_UTF8_FOLDER))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and is_unicode(d))
        if pruning:
            dirnames[:] = _kept(ignore, root, Path(dirpath), dirnames, out.excluded, folder=True)
        for name in filenames:
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            if path.suffix.lower() not in exts:
                continue
            if pruning and not _kept(ignore, root, Path(dirpath), [name], out.excluded):
                continue
            problem = _NOT_UTF8_FILE if not is_unicode(name) else None
            problem = problem or not_a_file(path) or outside_link(path, root)
            if problem is None:
                out.files.append(path)
            else:
                out.rejected.append((path, problem))
    out.files.sort()
    out.rejected.sort()
    out.excluded.sort()
    return out


def _kept(
    ignore: IgnoreRules | None,
    root: Path,
    parent: Path,
    names: list[str],
    excluded: list[str],
    *,
    folder: bool = False,
) -> list[str]:
    """``names`` in ``parent`` that ``ignore`` keeps; the others go to ``excluded``."""
    if ignore is None:
        return names
    kept = []
    for name in names:
        rel = (parent / name).relative_to(root).as_posix()
        if ignore.excludes(rel, folder=folder):
            excluded.append(rel + "/" if folder else rel)
        else:
            kept.append(name)
    return kept


def discover_files(root: Path, extensions: Iterable[str]) -> list[Path]:
    """The readable files of :func:`discover`."""
    return discover(root, extensions).files


def chapter_of(path: Path, root: Path) -> str:
    """The first folder under the ingest root, which is how books and doc sites
    group chapters; files at the top level get '' (the caller uses the title)."""
    try:
        rel = path.relative_to(root if root.is_dir() else root.parent)
    except ValueError:
        return ""
    return rel.parts[0] if len(rel.parts) > 1 else ""
