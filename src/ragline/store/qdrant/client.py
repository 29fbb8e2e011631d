"""Opening Qdrant: a server URL or a local-mode folder, and the collections a store
keeps there (created with their vector kinds and payload indexes)."""

from __future__ import annotations

import os
from pathlib import Path

from qdrant_client import QdrantClient, models

from ragline.store.qdrant.points import DENSE, SPARSE

#: Payload keys with an index: the filter fields, plus the write id and kind.
KEYWORD_INDEXES = (
    "id",
    "doc_id",
    "tenant",
    "chapter",
    "section",
    "source",
    "content_hash",
    "write",
    "language",
)
BOOL_INDEXES = ("has_code", "has_equations")
INT_INDEXES = ("chunk_index", "page")


def _target(location: str | Path) -> str:
    text = str(location)
    if text.startswith("qdrant+local://"):
        return text[len("qdrant+local://") :]
    if text.startswith("qdrant://"):
        return "http://" + text[len("qdrant://") :]
    return text


def local_folder(location: str | Path) -> Path | None:
    """The folder of a local-mode location, None for a server URL."""
    text = _target(location)
    return None if text.startswith(("http://", "https://")) else Path(text)


def folder_id(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def make_client(
    location: str | Path, api_key: str | None = None, timeout: int = 30
) -> QdrantClient:
    """A client for ``http(s)://host:port`` / ``qdrant://host:port`` or a local folder."""
    text = _target(location)
    if text.startswith(("http://", "https://")):
        return QdrantClient(url=text, api_key=api_key or None, timeout=timeout)
    path = Path(text)
    path.mkdir(parents=True, exist_ok=True)
    return QdrantClient(path=str(path))


def create_chunks(client: QdrantClient, name: str, dimension: int) -> None:
    """A new (emptied) chunks collection: dense + per-field sparse vectors, payload indexes."""
    if client.collection_exists(name):
        client.delete_collection(name)
    client.create_collection(
        name,
        vectors_config={
            DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
        },
        sparse_vectors_config={
            v: models.SparseVectorParams(modifier=models.Modifier.IDF) for v in SPARSE.values()
        },
    )
    for key in KEYWORD_INDEXES:
        client.create_payload_index(name, key, models.PayloadSchemaType.KEYWORD)
    for key in BOOL_INDEXES:
        client.create_payload_index(name, key, models.PayloadSchemaType.BOOL)
    for key in INT_INDEXES:
        client.create_payload_index(name, key, models.PayloadSchemaType.INTEGER)
