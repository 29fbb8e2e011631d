"""What Qdrant holds for a store, as pure functions: point ids, payloads, the
BM25 sparse vectors, filters and the ``store`` point's state record."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from qdrant_client import models

from ragline.embed.base import ModelFingerprint
from ragline.store import remote
from ragline.store.base import (
    CHUNK_COLUMNS,
    chunk_from_row,
    metadata_json,
)
from ragline.store.filter_qdrant import chunk_filter, front_matter_payload
from ragline.store.filters import CHUNK_FILTER_FIELDS, metadata_filter_values, to_sql_predicate
from ragline.text import bm25
from ragline.types import Chunk, Filters

FORMAT_VERSION = 1
DENSE = "dense"
SPARSE = {f: f"bm25_{f}" for f in bm25.KEYWORD_FIELDS}
NS = uuid.UUID("6f1c2a0e-6d55-4a47-9b1e-2b1f3c1d9a10")
STORE_ID = str(uuid.uuid5(NS, "store"))
UPSERT_BATCH = 256
MAX_QUERY_CHARS = 2000


def chunk_point_id(write_id: str, chunk_id: str) -> str:
    """Point id of a chunk written by one write: new writes never overwrite old points."""
    return str(uuid.uuid5(NS, f"{write_id}\x00{chunk_id}"))


def document_point_id(doc_id: str) -> str:
    return str(uuid.uuid5(NS, f"document\x00{doc_id}"))


def to_qdrant_filter(
    filters: Filters | None, fields: Mapping[str, type] = CHUNK_FILTER_FIELDS
) -> models.Filter | None:
    """ragline's filters as a Qdrant filter: a chunk filter in the full syntax
    (:mod:`ragline.store.filter_qdrant`), a document filter as equality tests."""
    if not filters:
        return None
    if fields is CHUNK_FILTER_FIELDS:
        return chunk_filter(filters)
    to_sql_predicate(filters, fields)  # ValueError naming a bad field or value type
    return models.Filter(
        must=[
            models.FieldCondition(key=k, match=models.MatchValue(value=v))
            for k, v in sorted(filters.items())
        ]
    )


def and_filters(*parts: models.Filter | None, must_not: list[Any] | None = None) -> models.Filter:
    must: list[Any] = []
    for p in parts:
        if p is not None:
            must.extend(p.must or [])
    return models.Filter(must=must or None, must_not=must_not)


def sparse_field_vectors(
    chunk: Chunk, avgdl: Mapping[str, float], k1: float, b: float
) -> tuple[dict[str, models.SparseVector], dict[str, int]]:
    """Each BM25 field's document-side sparse vector (tf weights) and token count."""
    vectors: dict[str, models.SparseVector] = {}
    lengths: dict[str, int] = {}
    for name, terms in bm25.chunk_terms(chunk).items():
        lengths[name] = terms.length
        if not terms.length:
            continue
        weights: dict[int, float] = {}
        for term, tf in terms.tf.items():
            w = bm25.tf_weight(tf, terms.length, avgdl.get(name) or terms.length, k1, b)
            tid = bm25.term_id(term)
            weights[tid] = weights.get(tid, 0.0) + w
        vectors[SPARSE[name]] = models.SparseVector(
            indices=list(weights), values=list(weights.values())
        )
    return vectors, lengths


def chunk_payload(chunk: Chunk, write_id: str, lengths: Mapping[str, int]) -> dict[str, Any]:
    payload = {name: getattr(chunk, name) for name in CHUNK_COLUMNS}
    payload["heading_path"] = list(chunk.heading_path)
    payload["metadata"] = metadata_json(chunk.metadata)
    payload.update(metadata_filter_values(chunk.metadata))  # the ``language`` filter's key
    payload.update(front_matter_payload(chunk.metadata))  # what metadata filters read
    payload["write"] = write_id
    payload["bm25_len"] = dict(lengths)
    return payload


def payload_chunk(payload: Mapping[str, Any]) -> Chunk:
    return chunk_from_row([payload.get(name) for name in CHUNK_COLUMNS])


@dataclass(frozen=True, slots=True)
class StoreState:
    """The ``store`` point: live chunks collection, its generation, model, BM25 avgdl."""

    chunks: str
    generation: int
    dimension: int
    fingerprint: ModelFingerprint | None
    avgdl: dict[str, float]

    def payload(self) -> dict[str, Any]:
        return {
            "kind": "store",
            "format": FORMAT_VERSION,
            "chunks": self.chunks,
            "generation": self.generation,
            "dimension": self.dimension,
            "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
            "avgdl": self.avgdl,
        }

    @classmethod
    def from_payload(cls, p: Mapping[str, Any]) -> StoreState:
        remote.check_format("Qdrant", p.get("format"), FORMAT_VERSION)
        fp = p.get("fingerprint")
        return cls(
            chunks=str(p["chunks"]),
            generation=int(p["generation"]),
            dimension=int(p["dimension"]),
            fingerprint=ModelFingerprint.from_dict(fp) if fp else None,
            avgdl={k: float(v) for k, v in (p.get("avgdl") or {}).items()},
        )
