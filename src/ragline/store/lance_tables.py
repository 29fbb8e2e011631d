"""The tables of a LanceStore's folder: their Arrow schemas and rows, the
``meta.json`` that names the live chunks table, the calls that open them on
LanceDB's event loop, and the next generation's table that a rebuild fills.

Split from :mod:`ragline.store.lance` (the store, its writes and searches); see its
docstring for the folder's layout and why meta.json is swapped atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import pyarrow as pa

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store.base import DOCUMENT_COLUMNS, StoreError, check_vectors, metadata_json
from ragline.store.lance_indexes import VectorIndexPlan, finish_rebuilt_table
from ragline.types import Chunk, DocumentRecord

if TYPE_CHECKING:  # lancedb is imported on the first call into it (store/lance_cache.py)
    from lancedb.db import AsyncConnection
    from lancedb.table import AsyncTable

T = TypeVar("T")

FORMAT_VERSION = 1
META_FILE = "meta.json"
CHUNKS_TABLE = "chunks"
DOCUMENTS_TABLE = "documents"
#: Tries to open a fresh index when another process is creating it at the same time.
OPEN_ATTEMPTS = 6


def chunk_schema(dimension: int) -> pa.Schema:
    """Arrow schema of a chunks table: one column per Chunk field, plus the
    BM25 ``headings`` string and the ``vector``."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("tenant", pa.string(), nullable=False),
            pa.field("source", pa.string()),
            pa.field("title", pa.string()),
            pa.field("chapter", pa.string()),
            pa.field("section", pa.string()),
            pa.field("heading_path", pa.list_(pa.string())),
            pa.field("headings", pa.string()),
            pa.field("url", pa.string()),
            pa.field("anchor", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("start_char", pa.int64()),
            pa.field("end_char", pa.int64()),
            pa.field("token_count", pa.int32()),
            pa.field("word_count", pa.int32()),
            pa.field("has_code", pa.bool_()),
            pa.field("has_equations", pa.bool_()),
            pa.field("content_hash", pa.string()),
            pa.field("created_at", pa.string()),
            pa.field("text", pa.string()),
            pa.field("page", pa.int32(), nullable=True),
            pa.field("metadata", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("tenant", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("file_hash", pa.string()),
        pa.field("chunk_count", pa.int64()),
        pa.field("token_count", pa.int64()),
        pa.field("chapter", pa.string()),
        pa.field("title", pa.string()),
        pa.field("format", pa.string()),
        pa.field("ingested_at", pa.string()),
    ]
)


def vector_array(vectors: Vectors, dimension: int) -> pa.FixedSizeListArray:
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, dimension)


def chunks_to_arrow(chunks: Sequence[Chunk], vectors: Vectors, dimension: int) -> pa.Table:
    """Chunks and their vectors as rows of :func:`chunk_schema`."""
    vecs = check_vectors(vectors, len(chunks), dimension, "chunks")
    columns: dict[str, Any] = {
        "id": [c.id for c in chunks],
        "doc_id": [c.doc_id for c in chunks],
        "tenant": [c.tenant for c in chunks],
        "source": [c.source for c in chunks],
        "title": [c.title for c in chunks],
        "chapter": [c.chapter for c in chunks],
        "section": [c.section for c in chunks],
        "heading_path": [list(c.heading_path) for c in chunks],
        "headings": [" > ".join(h for h in c.heading_path if h) for c in chunks],
        "url": [c.url for c in chunks],
        "anchor": [c.anchor for c in chunks],
        "chunk_index": [c.chunk_index for c in chunks],
        "start_char": [c.start_char for c in chunks],
        "end_char": [c.end_char for c in chunks],
        "token_count": [c.token_count for c in chunks],
        "word_count": [c.word_count for c in chunks],
        "has_code": [c.has_code for c in chunks],
        "has_equations": [c.has_equations for c in chunks],
        "content_hash": [c.content_hash for c in chunks],
        "created_at": [c.created_at for c in chunks],
        "text": [c.text for c in chunks],
        "page": [c.page for c in chunks],
        "metadata": [metadata_json(c.metadata) for c in chunks],
    }
    schema = chunk_schema(dimension)
    arrays = [pa.array(columns[f.name], f.type) for f in schema if f.name != "vector"]
    arrays.append(vector_array(vecs, dimension))
    return pa.Table.from_arrays(arrays, schema=schema)


def document_to_row(record: DocumentRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in DOCUMENT_COLUMNS}


def rows_to_documents(table: pa.Table) -> list[DocumentRecord]:
    return [DocumentRecord(**row) for row in table.select(list(DOCUMENT_COLUMNS)).to_pylist()]


@dataclass(frozen=True, slots=True)
class Meta:
    chunks_table: str = CHUNKS_TABLE
    generation: int = 0
    fingerprint: ModelFingerprint | None = None
    vector_index: VectorIndexPlan | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT_VERSION,
                "chunks_table": self.chunks_table,
                "generation": self.generation,
                "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
                "vector_index": self.vector_index.to_dict() if self.vector_index else None,
            },
            indent=2,
        )

    @classmethod
    def from_file(cls, path: Path) -> Meta:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != FORMAT_VERSION:
                raise StoreError(
                    f"{path}: index format {data.get('format')!r} is not supported "
                    f"(this ragline reads format {FORMAT_VERSION})"
                )
            fp = data.get("fingerprint")
            vi = data.get("vector_index")
            return cls(
                chunks_table=str(data["chunks_table"]),
                generation=int(data["generation"]),
                fingerprint=ModelFingerprint.from_dict(fp) if fp else None,
                vector_index=VectorIndexPlan.from_dict(vi) if vi else None,
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{path}: cannot read index metadata: {exc}") from exc


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file + fsync + os.replace: readers see the old or new file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # not every platform can fsync a directory
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine on LanceDB's background loop; its errors become StoreError.

    Each public call builds one coroutine, so it crosses into LanceDB's event loop
    once: the sync ``lancedb.Table`` wrapper makes several hops per query (≈ 2 ms
    of the ~6 ms a 20k-row keyword search took through it).
    """
    from lancedb.background_loop import LOOP

    try:
        return cast(T, LOOP.run(coro))  # type: ignore[no-untyped-call]
    except (StoreError, StopAsyncIteration):
        raise
    except Exception as exc:
        raise StoreError(f"LanceDB: {exc}") from exc


def racing_creation(exc: StoreError) -> bool:
    """Whether opening a fresh index failed only because another process is creating
    the same tables at this moment."""
    text = str(exc).lower()
    return "conflict" in text or "was not found" in text


async def open_or_create(db: AsyncConnection, name: str, schema: pa.Schema) -> AsyncTable:
    if name in await table_names(db):
        return await db.open_table(name)
    return await db.create_table(name, schema=schema, exist_ok=True)


async def table_names(db: AsyncConnection) -> set[str]:
    return set((await db.list_tables()).tables)


async def table_dimension(table: AsyncTable) -> int:
    field_type = (await table.schema()).field("vector").type
    return int(cast(pa.FixedSizeListType, field_type).list_size)


def build_generation(
    db: AsyncConnection,
    path: Path,
    old: Meta,
    fingerprint: ModelFingerprint,
    batches: Iterable[tuple[list[Chunk], Vectors]],
    ann_min_rows: int,
) -> tuple[Meta, int]:
    """Write ``batches`` into a new chunks table one generation past ``old`` and
    index it; return the meta that makes it live and its row count. The live table
    is never touched, so a failure (or Ctrl-C) leaves it serving: the new table is
    dropped and the error propagates unchanged. Tables left by a crashed rebuild
    are dropped first."""
    generation = old.generation + 1
    name = f"{CHUNKS_TABLE}_{generation}"
    dimension = fingerprint.dimension
    try:
        for stale in run(table_names(db)):
            if stale.startswith(CHUNKS_TABLE) and stale != old.chunks_table:
                run(db.drop_table(stale))
        table = run(db.create_table(name, schema=chunk_schema(dimension)))
    except Exception as exc:
        raise StoreError(f"{path}: rebuild could not start: {exc}") from exc
    count = 0
    try:
        for chunks, vectors in batches:
            if chunks:
                run(table.add(chunks_to_arrow(chunks, vectors, dimension)))
                count += len(chunks)
        vector_index = run(finish_rebuilt_table(table, count, ann_min_rows))
    except BaseException:
        with contextlib.suppress(Exception):
            run(db.drop_table(name))
        raise
    meta = Meta(name, generation, fingerprint, vector_index)
    return meta, count


def stored_dimension(path: Path) -> int:
    """The vector size an existing index was built with: its fingerprint's in
    meta.json (no LanceDB needed), else its chunks table's schema."""
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise StoreError(f"{path}: no ragline index here (missing {META_FILE})")
    meta = Meta.from_file(meta_path)
    if meta.fingerprint is not None:
        return meta.fingerprint.dimension

    async def dimension() -> int:
        import lancedb

        db = await lancedb.connect_async(path)
        return await table_dimension(await db.open_table(meta.chunks_table))

    try:
        return run(dimension())
    except Exception as exc:
        raise StoreError(f"{path}: cannot open table {meta.chunks_table!r}: {exc}") from exc
