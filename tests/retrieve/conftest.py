"""Shared builders for the retrieval tests: hand-made chunks and hits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ragline.types import Chunk, Hit


def build_chunk(
    cid: str,
    *,
    text: str = "",
    doc_id: str = "doc",
    chunk_index: int = 0,
    token_count: int = 10,
    title: str = "Title",
    section: str = "",
    heading_path: tuple[str, ...] = (),
    tenant: str = "default",
    **extra: Any,
) -> Chunk:
    """A Chunk with every field filled; only what a test cares about is named."""
    fields: dict[str, Any] = {
        "id": cid,
        "doc_id": doc_id,
        "tenant": tenant,
        "source": f"/docs/{doc_id}.md",
        "title": title,
        "chapter": "",
        "section": section,
        "heading_path": heading_path,
        "url": f"file:///docs/{doc_id}.md",
        "anchor": "",
        "chunk_index": chunk_index,
        "start_char": 0,
        "end_char": len(text),
        "token_count": token_count,
        "word_count": len(text.split()),
        "has_code": False,
        "has_equations": False,
        "content_hash": f"hash-{cid}",
        "created_at": "2024-01-01T00:00:00Z",
        "text": text or f"text of {cid}",
    }
    fields.update(extra)
    return Chunk(**fields)


@pytest.fixture(scope="session")
def make_chunk() -> Callable[..., Chunk]:
    return build_chunk


@pytest.fixture(scope="session")
def make_hit() -> Callable[..., Hit]:
    def _hit(cid: str, score: float = 0.0, **kw: Any) -> Hit:
        chunk_kw = {k: kw.pop(k) for k in list(kw) if k not in Hit.__dataclass_fields__}
        return Hit(chunk=build_chunk(cid, **chunk_kw), score=score, **kw)

    return _hit
