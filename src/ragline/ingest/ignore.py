"""Which files an ingest leaves out: ``--exclude`` globs and a ``.raglineignore`` file.

Both use gitignore syntax (``pathspec``'s implementation of Git's rules), matched
against paths relative to the ingest root: ``release-notes.md`` anywhere,
``/CHANGELOG.md`` at the top only, ``drafts/`` a whole folder, ``!keep.md`` back in.
A release-notes file or a vendored folder can otherwise outweigh the rest of a
documentation set (one release-notes.md made 1,673 of 2,864 chunks).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pathspec import GitIgnoreSpec

from ragline.errors import InputError

#: Read from the top of the ingest root (a folder), like .gitignore.
IGNORE_FILE = ".raglineignore"


class IgnoreFileError(InputError, ValueError):
    """A ``.raglineignore`` (or ``--exclude``) pattern that cannot be parsed."""


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """The exclusion patterns of one run; ``sources`` says where they came from."""

    spec: GitIgnoreSpec
    sources: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.spec.patterns

    def excludes(self, rel: str, *, folder: bool = False) -> bool:
        """Is the path ``rel`` (POSIX, relative to the root) left out? A folder is
        matched with a trailing slash, so ``drafts/`` prunes the whole folder."""
        if self.empty:
            return False
        return self.spec.match_file(rel + "/" if folder else rel)


def rules_for(root: Path, patterns: Iterable[str] = ()) -> IgnoreRules:
    """``root``'s ``.raglineignore`` (when ``root`` is a folder holding one) and
    ``patterns`` (``--exclude``, later ones win as in a gitignore file)."""
    lines: list[str] = []
    sources: list[str] = []
    ignore_file = root / IGNORE_FILE
    if root.is_dir() and ignore_file.is_file():
        try:
            lines += ignore_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise IgnoreFileError(f"{ignore_file}: cannot read: {e}") from None
        sources.append(str(ignore_file))
    extra = [p for p in patterns if p.strip()]
    if extra:
        lines += extra
        sources.append("--exclude " + " ".join(extra))
    try:
        spec = GitIgnoreSpec.from_lines(lines)
    except (ValueError, TypeError) as e:  # pathspec's GitWildMatchPatternError is a ValueError
        raise IgnoreFileError(f"{' and '.join(sources)}: bad pattern: {e}") from None
    return IgnoreRules(spec, tuple(sources))
