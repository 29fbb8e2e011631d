"""What the corpus covers, for the fallback answer: "I can't answer that, but I
can tell you about X, Y and Z" is more useful than a bare refusal."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from ragline.types import DocumentRecord

_INDEX_STEMS = frozenset({"index", "readme", "_index", "intro", "introduction"})


def corpus_topics(documents: Sequence[DocumentRecord], limit: int = 5) -> list[str]:
    """Titles naming the largest chapters of the corpus (by chunk count).

    A chapter is named by its index/README document when it has one (in d2l-en the
    chapter's ``index.md`` carries the chapter title), else by its largest
    document. Pure: the caller passes ``store.documents(tenant)``.
    """
    chapters: dict[str, list[DocumentRecord]] = {}
    for d in documents:
        chapters.setdefault(d.chapter or d.title, []).append(d)
    ranked = sorted(
        chapters.values(), key=lambda docs: (-sum(d.chunk_count for d in docs), docs[0].chapter)
    )
    out: list[str] = []
    for docs in ranked:
        index = [d for d in docs if PurePath(d.source).stem.lower() in _INDEX_STEMS]
        pick = index[0] if index else max(docs, key=lambda d: (d.chunk_count, d.title))
        title = (pick.title or pick.chapter).strip()
        if title and title not in out:
            out.append(title)
        if len(out) >= limit:
            break
    return out
