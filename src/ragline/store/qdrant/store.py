"""QdrantStore: reads, search and maintenance, over the journalled writes
(:mod:`.writes`) and the connection (:mod:`.connection`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
from qdrant_client import models

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store import remote
from ragline.store.base import DOCUMENT_COLUMNS, CandidateQuery, Ranking, listing_order, positions
from ragline.store.filters import DOCUMENT_FILTER_FIELDS
from ragline.store.qdrant.client import create_chunks
from ragline.store.qdrant.points import (
    DENSE,
    MAX_QUERY_CHARS,
    SPARSE,
    StoreState,
    and_filters,
    payload_chunk,
    sparse_field_vectors,
    to_qdrant_filter,
)
from ragline.store.qdrant.writes import QdrantWrites
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, FieldBoosts


class QdrantStore(QdrantWrites):
    """The :class:`~ragline.store.base.Store` on Qdrant (server, cluster or local mode).

    ``location``: a server URL or a local folder; ``collection``: name prefix of
    the store's collections; ``dimension``: vector size for a new store.
    """

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        with self._lock:
            self._check_open()
            flt = and_filters(
                models.Filter(
                    must=[
                        models.FieldCondition(key="kind", match=models.MatchValue(value="document"))
                    ]
                ),
                to_qdrant_filter(
                    {"tenant": tenant} if tenant is not None else None, DOCUMENT_FILTER_FIELDS
                ),
            )
            out = [
                DocumentRecord(**{k: (p.payload or {})[k] for k in DOCUMENT_COLUMNS})
                for batch in self._scroll(self._meta, flt)
                for p in batch
            ]
        return listing_order(out)

    def _chunk_points(self, flt: models.Filter, with_vectors: bool = False) -> list[models.Record]:
        state = self._fresh()
        vec: bool | list[str] = [DENSE] if with_vectors else False
        return [p for b in self._scroll(state.chunks, flt, with_vectors=vec) for p in b]

    @staticmethod
    def _dense(point: models.Record | models.ScoredPoint) -> Vectors:
        v = point.vector
        dense = v.get(DENSE) if isinstance(v, dict) else v
        return np.asarray(dense, dtype=np.float32)

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        wanted = positions(indices)
        if wanted == []:
            return []
        with self._lock:
            must = [models.FieldCondition(key="doc_id", match=models.MatchValue(value=doc_id))]
            if wanted is not None:
                at = models.MatchAny(any=wanted)
                must.append(models.FieldCondition(key="chunk_index", match=at))
            flt = models.Filter(must=must)
            chunks = [payload_chunk(p.payload or {}) for p in self._chunk_points(flt)]
        return sorted(chunks, key=lambda c: c.chunk_index)

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        state = self._fresh()
        for batch in self._scroll(state.chunks, None, with_vectors=[DENSE], batch=batch_size):
            chunks = [payload_chunk(p.payload or {}) for p in batch]
            vecs = np.stack([self._dense(p) for p in batch]).astype(np.float32)
            yield chunks, vecs

    def _cosine_top(self, query: CandidateQuery) -> Ranking:
        k = query.k
        if query.vector is None or k <= 0:
            return []
        flt = to_qdrant_filter(query.filters)
        with self._lock:
            state = self._fresh()
            q = remote.query_vector(query.vector, state.dimension)
            result = self._call(
                "vector search",
                self._client.query_points,
                state.chunks,
                query=q.tolist(),
                using=DENSE,
                query_filter=flt,
                limit=k,
                with_payload=["id"],
                search_params=models.SearchParams(hnsw_ef=max(self.hnsw_ef, k)),
            )
        return [(str((p.payload or {})["id"]), float(p.score)) for p in result.points]

    def _bm25_top(self, query: CandidateQuery) -> Ranking:
        k, boosts = query.k, query.boosts
        if k <= 0:
            return []
        flt = to_qdrant_filter(query.filters)
        counts = bm25.query_counts((query.text or "")[:MAX_QUERY_CHARS])
        if not counts:
            return []
        weights: dict[int, float] = {}
        for term, n in counts.items():
            tid = bm25.term_id(term)
            weights[tid] = weights.get(tid, 0.0) + n
        sparse = models.SparseVector(indices=list(weights), values=list(weights.values()))
        b = boosts or FieldBoosts()
        fields = [
            (f, w)
            for f, w in zip(bm25.KEYWORD_FIELDS, (b.title, b.headings, b.text), strict=True)
            if w > 0
        ]
        if not fields:
            return []
        with self._lock:
            state = self._fresh()
            requests = [
                models.QueryRequest(
                    query=sparse, using=SPARSE[f], filter=flt, limit=k, with_payload=["id"]
                )
                for f, _ in fields
            ]
            responses = self._call(
                "keyword search", self._client.query_batch_points, state.chunks, requests
            )
        best: dict[str, float] = {}
        for (_, boost), response in zip(fields, responses, strict=True):
            for p in response.points:
                score = boost * float(p.score)
                cid = str((p.payload or {})["id"])
                if score > 0 and score > best.get(cid, 0.0):
                    best[cid] = score
        return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        if not ids:
            return {}
        with self._lock:
            flt = models.Filter(
                must=[models.FieldCondition(key="id", match=models.MatchAny(any=list(set(ids))))]
            )
            return {
                str((p.payload or {})["id"]): (payload_chunk(p.payload or {}), self._dense(p))
                for p in self._chunk_points(flt, with_vectors=True)
            }

    def optimize(self) -> None:
        """Bring BM25 statistics up to date: recompute avgdl per field and rewrite the
        sparse vectors when it moved by more than ``avgdl_tolerance``."""
        with self._lock:
            state = self._fresh()
            self._recover()
            totals = {f: [0, 0] for f in bm25.KEYWORD_FIELDS}
            for batch in self._scroll(state.chunks, None, with_payload=["bm25_len"]):
                for p in batch:
                    for f, n in ((p.payload or {}).get("bm25_len") or {}).items():
                        if n and f in totals:
                            totals[f][0] += 1
                            totals[f][1] += int(n)
            avgdl = {f: t / n for f, (n, t) in totals.items() if n}
            moved = set(avgdl) != set(state.avgdl) or any(
                abs(avgdl[f] - state.avgdl[f]) > self.avgdl_tolerance * state.avgdl[f]
                for f in avgdl
            )
            if not moved:
                return
            for batch in self._scroll(state.chunks, None):
                updates = []
                for p in batch:
                    chunk = payload_chunk(p.payload or {})
                    sparse, _ = sparse_field_vectors(chunk, avgdl, self.k1, self.b)
                    if sparse:
                        updates.append(models.PointVectors(id=p.id, vector=sparse))
                if updates:
                    self._call(
                        "updating BM25 weights",
                        self._client.update_vectors,
                        state.chunks,
                        updates,
                        wait=True,
                    )
            self._put_avgdl(state, avgdl)

    def _create_next(self, old: StoreState, fingerprint: ModelFingerprint) -> StoreState:
        generation = old.generation + 1
        name = f"{self.name}_chunks_{generation}"
        dimension = fingerprint.dimension
        self._call("creating a collection", create_chunks, self._client, name, dimension)
        return StoreState(name, generation, dimension, fingerprint, old.avgdl)

    def _fill_batch(self, new: StoreState, chunks: list[Chunk], vectors: Vectors) -> None:
        points = self._points(chunks, vectors, f"rebuild-{new.generation}", new.avgdl)
        self._upsert(new.chunks, points)

    def _drop(self, state: StoreState) -> None:
        self._client.delete_collection(state.chunks)

    def _rebuilt(self, count: int) -> None:
        if count:
            self.optimize()
