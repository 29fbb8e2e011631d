"""Turn a parsed document's chunk drafts into indexed Chunk rows (pure)."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ragline.text.language import chunk_language, document_language
from ragline.types import Chunk, ChunkDraft, ParsedDocument

_SLUG_DROP = re.compile(r"[^\w\- ]+")


def doc_id_for(tenant: str, source: str) -> str:
    """Documents are identified by tenant and canonical path: the same file in
    two tenants is two documents."""
    return hashlib.sha256(f"{tenant}\0{source}".encode()).hexdigest()[:24]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def slugify(heading: str) -> str:
    """GitHub-style anchor: lower case, punctuation dropped, spaces to hyphens."""
    s = unicodedata.normalize("NFKC", heading).strip().lower()
    return _SLUG_DROP.sub("", s).replace(" ", "-")


def jsonable(value: Any) -> Any:
    """Front matter may hold dates and other YAML types; keep it JSON-safe."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def chunk_url(source: str, rel_path: str, anchor: str, base_url: str) -> str:
    """A link to the passage: under ``base_url`` when the corpus is published, else
    a file URL; a web page's own URL (its source) when it came from the web."""
    frag = f"#{anchor}" if anchor else ""
    if source.startswith(("http://", "https://")):
        return source.split("#", 1)[0] + frag
    if base_url:
        return f"{base_url.rstrip('/')}/{rel_path}{frag}"
    return Path(source).as_uri() + frag


#: Chapter and section of a chunk that has none (seed 002's defaults).
UNKNOWN_CHAPTER = "Unknown"
NO_SECTION = "N/A"


def explicit_anchors(doc: ParsedDocument) -> dict[tuple[str, ...], str]:
    """Heading path → the id its heading declared (``{#id}``, ``{/*id*/}``)."""
    return {b.heading_path: b.anchor for b in doc.blocks if b.anchor and b.heading_path}


def build_chunks(
    doc: ParsedDocument,
    drafts: Sequence[ChunkDraft],
    *,
    tenant: str,
    source: str,
    rel_path: str,
    chapter: str,
    base_url: str,
    created_at: str,
) -> list[Chunk]:
    """Chunk rows with stable ids: the id hashes tenant, document and content (plus
    an ordinal among identical chunks), so edits elsewhere in a file keep it."""
    doc_id = doc_id_for(tenant, source)
    meta = jsonable(dict(doc.metadata))
    declared = meta.get("language", meta.get("lang"))
    doc_language = document_language(f"{doc.title}\n{doc.body}", declared)
    seen: dict[str, int] = {}
    explicit = explicit_anchors(doc)
    chunks: list[Chunk] = []
    for i, d in enumerate(drafts):
        # seed 002's defaults for missing metadata (an empty heading, no title)
        section = (d.heading_path[-1] if d.heading_path else doc.title) or NO_SECTION
        anchor = ""
        if len(d.heading_path) > 1:
            anchor = explicit.get(tuple(d.heading_path)) or slugify(d.heading_path[-1])
        chunk = Chunk(
            id="",
            doc_id=doc_id,
            tenant=tenant,
            source=source,
            title=doc.title,
            chapter=chapter or doc.title or UNKNOWN_CHAPTER,
            section=section,
            heading_path=tuple(d.heading_path),
            url=chunk_url(source, rel_path, anchor, base_url),
            anchor=anchor,
            chunk_index=i,
            start_char=d.start,
            end_char=d.end,
            token_count=d.token_count,
            word_count=len(d.text.split()),
            has_code=d.has_code,
            has_equations=d.has_equations,
            content_hash="",
            created_at=created_at,
            text=d.text,
            page=d.page,
            metadata={**meta, "language": chunk_language(d.text, doc_language)},
        )
        chunk.content_hash = content_hash(chunk.embed_text)
        n = seen.get(chunk.content_hash, 0)
        seen[chunk.content_hash] = n + 1
        chunk.id = hashlib.sha256(f"{doc_id}\0{chunk.content_hash}\0{n}".encode()).hexdigest()[:32]
        chunks.append(chunk)
    return chunks
