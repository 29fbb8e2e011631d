"""Talking to Chroma: the client for a location, filters as ``where``, chunk records.

Pure translation plus one constructor; the store logic is in
:mod:`ragline.store.chroma.store`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ragline.store.base import CHUNK_COLUMNS, chunk_from_row
from ragline.store.filter_ast import conditions, is_equality, parse
from ragline.store.filters import CHUNK_FILTER_FIELDS, CHUNK_METADATA_FILTERS, to_sql_predicate
from ragline.store.remote import flat_chunk
from ragline.types import Chunk, Filters

#: Chunk fields kept as Chroma metadata (the text is the record's document).
_META_FIELDS = tuple(c for c in CHUNK_COLUMNS if c != "text")


def make_client(location: str | Path) -> Any:
    """A Chroma client: ``http://host:port`` for a server, else a local folder
    (``PersistentClient``; telemetry off, nothing leaves the machine)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    text = str(location)
    options = ChromaSettings(anonymized_telemetry=False)
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        port = parts.port or (443 if parts.scheme == "https" else 8000)
        return chromadb.HttpClient(
            host=parts.hostname or "127.0.0.1",
            port=port,
            ssl=parts.scheme == "https",
            settings=options,
        )
    path = Path(text)
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=options)


def in_chroma(filters: Filters | Mapping[str, Any] | None) -> bool:
    """Whether Chroma's ``where`` says ``filters`` as they are: equality on chunk
    fields and ``language`` (the keys a record's metadata has). Raises FilterError
    (a ValueError naming key and operator) for a bad filter."""
    node = parse(filters, CHUNK_FILTER_FIELDS) if filters else None
    return is_equality(node) and all(
        c.field.column is not None
        or (
            c.field.name in CHUNK_METADATA_FILTERS
            and isinstance(c.value, str)
            and bool(CHUNK_METADATA_FILTERS[c.field.name].match(c.value))
        )
        for c in conditions(node)
    )


def to_where(filters: Filters | Mapping[str, Any] | None, **extra: Any) -> dict[str, Any] | None:
    """ragline's equality filters (:func:`in_chroma`) plus ``extra`` conditions
    (already in Chroma's form) as one Chroma ``where``."""
    if filters and not in_chroma(filters):
        raise ValueError("Chroma's where cannot say this filter; the term index answers it")
    if filters:
        to_sql_predicate(dict(filters), CHUNK_FILTER_FIELDS)  # ValueError naming the field
    parts: list[dict[str, Any]] = [{k: v} for k, v in sorted((filters or {}).items())]
    parts += [{k: v} for k, v in sorted(extra.items())]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def chunk_metadata(chunk: Chunk, write_id: str) -> dict[str, Any]:
    """A chunk's Chroma metadata: scalar fields as they are (None left out: Chroma
    stores no nulls), the heading path and metadata as JSON text, the write id."""
    out = flat_chunk(chunk, _META_FIELDS, json.dumps)
    out["write"] = write_id
    return out


def metadata_chunk(meta: Mapping[str, Any], text: str | None) -> Chunk:
    """The Chunk a record's metadata and document hold."""
    row: list[Any] = []
    for name in CHUNK_COLUMNS:
        if name == "text":
            row.append(text or "")
        elif name == "heading_path":
            row.append(json.loads(meta.get(name) or "[]"))
        else:
            row.append(meta.get(name))
    return chunk_from_row(row)
