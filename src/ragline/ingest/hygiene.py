"""Structure warnings about a parsed document: things that do not stop it being
indexed but that an author would want to fix (seed 004: warn on H2 → H4)."""

from __future__ import annotations

from collections.abc import Iterable

from ragline.types import Block, BlockKind


def skipped_heading_levels(blocks: Iterable[Block]) -> list[tuple[int, str]]:
    """(line, message) for each heading deeper than one level below the one before it
    (``## A`` then ``#### B``); the first heading may be at any level."""
    out: list[tuple[int, str]] = []
    previous = 0
    for block in blocks:
        if block.kind is not BlockKind.HEADING or not block.level:
            continue
        if previous and block.level > previous + 1:
            out.append(
                (
                    block.line,
                    f"heading level skipped: H{previous} → H{block.level} "
                    f"({' > '.join(block.heading_path) or 'heading'})",
                )
            )
        previous = block.level
    return out


def missing_metadata(blocks: Iterable[Block], chapter: str) -> list[tuple[int, str]]:
    """(line, message) for metadata a chunk will lack and get a default for: an empty
    heading (its section becomes "N/A") or no chapter at all ("Unknown")."""
    out = [
        (b.line, 'empty heading: the section of the text under it is set to "N/A"')
        for b in blocks
        if b.kind is BlockKind.HEADING and b.heading_path and not b.heading_path[-1].strip()
    ]
    if not chapter:
        out.insert(0, (1, 'no chapter (no folder and no title): chapter set to "Unknown"'))
    return out
