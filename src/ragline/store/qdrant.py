"""QdrantStore: chunks in Qdrant (a server or cluster, or local mode in a folder).

Layout, for a store named ``<c>``::

    <c>_chunks[_<gen>]  one point per chunk: named dense vector ``dense`` (cosine),
                        named sparse vectors ``bm25_title``/``bm25_headings``/``bm25_text``
                        (Modifier.IDF), payload = every Chunk field + ``write`` id
    <c>_meta            no vectors: the ``store`` point (format, live chunks collection,
                        model fingerprint, BM25 avgdl per field), one ``document`` point
                        per ingested file, and ``write`` journal points

Why it is built the way it is:

* BM25 equals LanceStore's (``ragline.text.bm25``): the document side of each
  field's sparse vector holds the saturated, length-normalised term weight
  ``(k1+1)·tf/(tf + k1·(1−b+b·dl/avgdl))`` and Qdrant multiplies the query side
  (term id → number of occurrences in the query) by its IDF,
  ``ln(1 + (N−df+0.5)/(df+0.5))`` over the points that have that vector: a field
  without tokens gets no vector, so it is no document of that field, as in
  LanceDB. One sparse vector per field, because LanceDB's multi-field query
  takes the best boosted field (``max``), not a sum: the three fields are
  searched in one batch request and a chunk's score is ``max_f boost_f·bm25_f``;
  the union of the per-field top-k holds the exact top-k of that maximum.
  ``avgdl`` is recorded in the ``store`` point; ``optimize()`` recomputes it and
  rewrites the sparse vectors when it moved by more than ``avgdl_tolerance``, so
  scores are exact after ``optimize()`` (as LanceDB's are).
* Term ids are 32-bit BLAKE2b hashes of the terms (``bm25.term_id``); two terms
  sharing an id (probability ≈ V/2³² per term) would count as one.
* Writes are journalled, because Qdrant has no multi-point transaction.
  ``replace_documents`` records a ``write`` point (the documents, their records
  and the new chunk count), upserts the new chunks under new point ids tagged
  with the write id, deletes the documents' other chunks with one filtered
  delete, writes the records, then drops the journal point. Opening the store
  (and every write) finishes what a crash interrupted: all new chunks present →
  roll forward (delete the old ones, write the records), otherwise roll back
  (delete the partial new ones). So after a crash each document has its old or
  its new chunks, never both. On a server, a concurrent reader can see both
  sets of one batch between the upsert and the delete (milliseconds).
* Filters become Qdrant payload filters (pre-filters: top-k stays exact);
  payload indexes cover tenant, doc_id, chapter, has_code, has_equations and the
  other equality keys (a server uses them; local mode scans).
* Local mode (``qdrant_client.QdrantClient(path=…)``) is single-process: the
  folder is locked while a store has it open; searches there are exhaustive.
  It answers from memory, so it would go on answering (and write into a moved
  folder) after its folder went away: every call first checks that the folder
  is still the one it opened (device and inode). Missing → ``StoreError`` (a
  server degrades and says so); back → normal again; a different folder put
  in its place (a restored copy) → the client is reopened on it.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store import remote
from ragline.store.base import (
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    DocumentWrite,
    StoreAbilities,
    StoreError,
    check_writes,
    chunk_from_row,
    metadata_json,
    positions,
    takes_new_dimension,
)
from ragline.store.filter_qdrant import chunk_filter, front_matter_payload
from ragline.store.filters import CHUNK_FILTER_FIELDS, DOCUMENT_FILTER_FIELDS, to_sql_predicate
from ragline.store.remote import RemoteStore
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, FieldBoosts, Filters

FORMAT_VERSION = 1
DENSE = "dense"
SPARSE = {f: f"bm25_{f}" for f in bm25.KEYWORD_FIELDS}
_NS = uuid.UUID("6f1c2a0e-6d55-4a47-9b1e-2b1f3c1d9a10")
_STORE_ID = str(uuid.uuid5(_NS, "store"))
#: Payload keys with an index: the filter fields, plus the write id and kind.
_KEYWORD_INDEXES = (
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
_BOOL_INDEXES = ("has_code", "has_equations")
_INT_INDEXES = ("chunk_index", "page")
_UPSERT_BATCH = 256
_MAX_QUERY_CHARS = 2000


def chunk_point_id(write_id: str, chunk_id: str) -> str:
    """Point id of a chunk written by one write: new writes never overwrite old points."""
    return str(uuid.uuid5(_NS, f"{write_id}\x00{chunk_id}"))


def document_point_id(doc_id: str) -> str:
    return str(uuid.uuid5(_NS, f"document\x00{doc_id}"))


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


def _and(*parts: models.Filter | None, must_not: list[Any] | None = None) -> models.Filter:
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


def _chunk_payload(chunk: Chunk, write_id: str, lengths: Mapping[str, int]) -> dict[str, Any]:
    payload = {name: getattr(chunk, name) for name in CHUNK_COLUMNS}
    payload["heading_path"] = list(chunk.heading_path)
    payload["metadata"] = metadata_json(chunk.metadata)
    if isinstance(chunk.metadata.get("language"), str):  # the ``language`` filter's key
        payload["language"] = chunk.metadata["language"]
    payload.update(front_matter_payload(chunk.metadata))  # what metadata filters read
    payload["write"] = write_id
    payload["bm25_len"] = dict(lengths)
    return payload


def _payload_chunk(payload: Mapping[str, Any]) -> Chunk:
    return chunk_from_row([payload.get(name) for name in CHUNK_COLUMNS])


@dataclass(frozen=True, slots=True)
class _StoreState:
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
    def from_payload(cls, p: Mapping[str, Any]) -> _StoreState:
        remote.check_format("Qdrant", p.get("format"), FORMAT_VERSION)
        fp = p.get("fingerprint")
        return cls(
            chunks=str(p["chunks"]),
            generation=int(p["generation"]),
            dimension=int(p["dimension"]),
            fingerprint=ModelFingerprint.from_dict(fp) if fp else None,
            avgdl={k: float(v) for k, v in (p.get("avgdl") or {}).items()},
        )


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


def _folder_id(path: Path) -> tuple[int, int]:
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


class QdrantStore(RemoteStore):
    """The :class:`~ragline.store.base.Store` on Qdrant (server, cluster or local mode).

    ``location``: a server URL or a local folder; ``collection``: name prefix of
    the store's collections; ``dimension``: vector size for a new store.
    """

    def __init__(
        self,
        location: str | Path,
        *,
        dimension: int,
        collection: str = "ragline",
        api_key: str | None = None,
        timeout_s: int = 30,
        bm25_k1: float = bm25.K1,
        bm25_b: float = bm25.B,
        avgdl_tolerance: float = 0.0,
        hnsw_ef: int = 128,
    ) -> None:
        remote.check_new_store(dimension, "collection", collection)
        super().__init__()
        self.location = str(location)
        self.label = f"Qdrant {self.location}"
        self.name = collection
        self.k1, self.b = bm25_k1, bm25_b
        self.avgdl_tolerance = avgdl_tolerance
        self.hnsw_ef = hnsw_ef
        self._meta = f"{collection}_meta"
        self._api_key, self._timeout_s = api_key, timeout_s
        self._folder = local_folder(location)
        with remote.opening(f"{self.label} ({collection})"):
            self._client = make_client(location, api_key, timeout_s)
            self._opened = _folder_id(self._folder) if self._folder is not None else None
            if not self._client.collection_exists(self._meta):
                self._client.create_collection(self._meta, vectors_config={})
                self._client.create_payload_index(
                    self._meta, "kind", models.PayloadSchemaType.KEYWORD
                )
                self._client.create_payload_index(
                    self._meta, "tenant", models.PayloadSchemaType.KEYWORD
                )
            found = self._client.retrieve(self._meta, [_STORE_ID], with_payload=True)
            if found:
                self._state = _StoreState.from_payload(found[0].payload or {})
            else:
                state = _StoreState(f"{collection}_chunks", 0, dimension, None, {})
                self._create_chunks(state.chunks, dimension)
                self._put_state(state)
            self._recover()

        self.abilities = StoreAbilities(describe=self.index_info)

    # ----------------------------------------------------------------- plumbing

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"Qdrant store {self.name!r} is closed")
        if self._folder is not None:
            self._check_folder(self._folder)

    def _check_folder(self, folder: Path) -> None:
        """Local mode: fail while the folder is gone; reopen on a replaced one."""
        try:
            now = _folder_id(folder)
        except OSError as exc:
            raise StoreError(f"Qdrant local folder {folder} is unavailable: {exc}") from exc
        if now == self._opened:
            return
        with self._lock:
            if now == self._opened:  # another thread reopened it meanwhile
                return
            with contextlib.suppress(Exception):
                self._client.close()
            try:
                self._client = make_client(folder, self._api_key, self._timeout_s)
            except Exception as exc:
                raise StoreError(f"Qdrant local folder {folder}: cannot reopen: {exc}") from exc
            self._opened = now

    def _fresh(self) -> _StoreState:
        """The store point as it is now (another process may have rebuilt)."""
        self._check_open()
        found = self._call(
            "reading the store point",
            self._client.retrieve,
            self._meta,
            [_STORE_ID],
            with_payload=True,
        )
        if not found:
            raise StoreError(
                f"Qdrant {self.location}: collection {self._meta} lost its store point"
            )
        self._state = _StoreState.from_payload(found[0].payload or {})
        return self._state

    def _put_state(self, state: _StoreState) -> None:
        self._client.upsert(
            self._meta,
            [models.PointStruct(id=_STORE_ID, vector={}, payload=state.payload())],
            wait=True,
        )
        self._state = state

    def _create_chunks(self, name: str, dimension: int) -> None:
        client = self._client
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
        for key in _KEYWORD_INDEXES:
            client.create_payload_index(name, key, models.PayloadSchemaType.KEYWORD)
        for key in _BOOL_INDEXES:
            client.create_payload_index(name, key, models.PayloadSchemaType.BOOL)
        for key in _INT_INDEXES:
            client.create_payload_index(name, key, models.PayloadSchemaType.INTEGER)

    def _scroll(
        self,
        collection: str,
        flt: models.Filter | None,
        *,
        with_payload: bool | list[str] = True,
        with_vectors: bool | list[str] = False,
        batch: int = 1024,
    ) -> Iterator[list[models.Record]]:
        offset: Any = None
        while True:
            points, offset = self._call(
                "scroll",
                self._client.scroll,
                collection,
                scroll_filter=flt,
                limit=batch,
                offset=offset,
                with_payload=with_payload,
                with_vectors=with_vectors,
            )
            if points:
                yield points
            if offset is None:
                return

    # -------------------------------------------------------------- fingerprint

    def _record_fingerprint(self, fingerprint: ModelFingerprint) -> None:
        with self._lock:
            state = self._fresh()
            if takes_new_dimension(fingerprint, state.dimension, self._count):
                self.rebuild(fingerprint, [])
                return
            self._call(
                "recording the model",
                self._put_state,
                _StoreState(
                    state.chunks, state.generation, state.dimension, fingerprint, state.avgdl
                ),
            )

    # ------------------------------------------------------------------- writes

    def _points(
        self, chunks: Sequence[Chunk], vectors: Vectors, write_id: str, avgdl: Mapping[str, float]
    ) -> list[models.PointStruct]:
        points = []
        for c, v in zip(chunks, vectors, strict=True):
            sparse, lengths = sparse_field_vectors(c, avgdl, self.k1, self.b)
            vec: dict[str, Any] = {DENSE: v.tolist(), **sparse}
            points.append(
                models.PointStruct(
                    id=chunk_point_id(write_id, c.id),
                    vector=vec,
                    payload=_chunk_payload(c, write_id, lengths),
                )
            )
        return points

    def _upsert(self, collection: str, points: list[models.PointStruct]) -> None:
        for part in remote.batches(points, _UPSERT_BATCH):
            self._call("upsert", self._client.upsert, collection, part, wait=True)

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        """Journal, upsert the new chunks, delete the old ones, write the records
        (see the module docstring for what a crash leaves)."""
        if not items:
            return
        with self._lock:
            state = self._fresh()
            self._recover()
            checked = list(zip(items, check_writes(items, state.dimension), strict=True))
            doc_ids = {item.record.doc_id for item in items}
            avgdl = state.avgdl
            if not avgdl:  # the first write: its own mean lengths
                avgdl = self._batch_avgdl([c for it, _ in checked for c in it.chunks])
            points: list[models.PointStruct] = []
            for item, vecs in checked:
                points.extend(self._points(item.chunks, vecs, "", avgdl))
            write_id = uuid.uuid4().hex
            for p in points:  # ids and tags of this write
                payload = p.payload or {}
                payload["write"] = write_id
                p.id = chunk_point_id(write_id, str(payload["id"]))
            journal = {
                "kind": "write",
                "write": write_id,
                "doc_ids": sorted(doc_ids),
                "chunks": len(points),
                "records": [
                    {name: getattr(it.record, name) for name in DOCUMENT_COLUMNS}
                    for it, _ in checked
                ],
            }
            journal_id = str(uuid.uuid5(_NS, f"write\x00{write_id}"))
            self._call(
                "journal",
                self._client.upsert,
                self._meta,
                [models.PointStruct(id=journal_id, vector={}, payload=journal)],
                wait=True,
            )
            self._upsert(state.chunks, points)
            self._finish(state.chunks, journal_id, journal)
            if avgdl is not state.avgdl:
                self._call(
                    "recording BM25 statistics",
                    self._put_state,
                    _StoreState(
                        state.chunks, state.generation, state.dimension, state.fingerprint, avgdl
                    ),
                )

    @staticmethod
    def _batch_avgdl(chunks: Sequence[Chunk]) -> dict[str, float]:
        terms = [bm25.chunk_terms(c) for c in chunks]
        stats = {f: bm25.FieldStats.of(t[f] for t in terms) for f in bm25.KEYWORD_FIELDS}
        return {f: s.avgdl for f, s in stats.items() if s.n}

    def _finish(self, chunks: str, journal_id: str, journal: Mapping[str, Any]) -> None:
        """Roll a complete write forward: drop the documents' other chunks, write records."""
        write_id = str(journal["write"])
        doc_ids = list(journal["doc_ids"])
        old = models.Filter(
            must=[models.FieldCondition(key="doc_id", match=models.MatchAny(any=doc_ids))],
            must_not=[models.FieldCondition(key="write", match=models.MatchValue(value=write_id))],
        )
        self._call(
            "deleting replaced chunks",
            self._client.delete,
            chunks,
            models.FilterSelector(filter=old),
            wait=True,
        )
        records = [
            models.PointStruct(
                id=document_point_id(r["doc_id"]), vector={}, payload={"kind": "document", **r}
            )
            for r in journal["records"]
        ]
        self._upsert(self._meta, records)
        self._call(
            "closing the journal",
            self._client.delete,
            self._meta,
            models.PointIdsList(points=[journal_id]),
            wait=True,
        )

    def _recover(self) -> None:
        """Finish or undo writes a crash interrupted (journal points left behind)."""
        state = self._state
        kind = models.Filter(
            must=[models.FieldCondition(key="kind", match=models.MatchValue(value="write"))]
        )
        for batch in self._scroll(self._meta, kind):
            for point in batch:
                journal = point.payload or {}
                write_id = str(journal.get("write"))
                mine = models.Filter(
                    must=[
                        models.FieldCondition(key="write", match=models.MatchValue(value=write_id))
                    ]
                )
                present = self._call(
                    "count", self._client.count, state.chunks, count_filter=mine, exact=True
                ).count
                if present == int(journal.get("chunks", -1)):
                    self._finish(state.chunks, str(point.id), journal)
                else:
                    self._call(
                        "rolling back an interrupted write",
                        self._client.delete,
                        state.chunks,
                        models.FilterSelector(filter=mine),
                        wait=True,
                    )
                    self._call(
                        "closing the journal",
                        self._client.delete,
                        self._meta,
                        models.PointIdsList(points=[point.id]),
                        wait=True,
                    )

    def delete_document(self, doc_id: str) -> None:
        with self._lock:
            state = self._fresh()
            flt = to_qdrant_filter({"doc_id": doc_id})
            assert flt is not None
            # chunks first: a crash leaves the record, so the next sync redoes the file
            self._call(
                f"deleting document {doc_id!r}",
                self._client.delete,
                state.chunks,
                models.FilterSelector(filter=flt),
                wait=True,
            )
            self._call(
                f"deleting document {doc_id!r}",
                self._client.delete,
                self._meta,
                models.PointIdsList(points=[document_point_id(doc_id)]),
                wait=True,
            )

    # -------------------------------------------------------------------- reads

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        with self._lock:
            self._check_open()
            flt = _and(
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
        out.sort(key=lambda r: (r.tenant, r.source, r.doc_id))
        return out

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
            chunks = [_payload_chunk(p.payload or {}) for p in self._chunk_points(flt)]
        return sorted(chunks, key=lambda c: c.chunk_index)

    def _count(self, filters: Filters | None = None) -> int:
        with self._lock:
            state = self._fresh()
            result = self._call(
                "count",
                self._client.count,
                state.chunks,
                count_filter=to_qdrant_filter(filters),
                exact=True,
            )
            return int(result.count)

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        state = self._fresh()
        for batch in self._scroll(state.chunks, None, with_vectors=[DENSE], batch=batch_size):
            chunks = [_payload_chunk(p.payload or {}) for p in batch]
            vecs = np.stack([self._dense(p) for p in batch]).astype(np.float32)
            yield chunks, vecs

    # ------------------------------------------------------------------- search

    def _cosine_top(
        self, query: Vectors, k: int, filters: Filters | None = None
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        flt = to_qdrant_filter(filters)
        with self._lock:
            state = self._fresh()
            q = remote.query_vector(query, state.dimension)
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

    def _bm25_top(
        self,
        query: str,
        k: int,
        filters: Filters | None = None,
        boosts: FieldBoosts | None = None,
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        flt = to_qdrant_filter(filters)
        counts = bm25.query_counts(query[:_MAX_QUERY_CHARS])
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
                str((p.payload or {})["id"]): (_payload_chunk(p.payload or {}), self._dense(p))
                for p in self._chunk_points(flt, with_vectors=True)
            }

    # -------------------------------------------------------------- maintenance

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
                    chunk = _payload_chunk(p.payload or {})
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
            self._call(
                "recording BM25 statistics",
                self._put_state,
                _StoreState(
                    state.chunks, state.generation, state.dimension, state.fingerprint, avgdl
                ),
            )

    def rebuild(
        self,
        fingerprint: ModelFingerprint,
        batches: Iterable[tuple[list[Chunk], Vectors]],
    ) -> int:
        with self._lock:
            old = self._fresh()
            generation = old.generation + 1
            name = f"{self.name}_chunks_{generation}"
            dimension = fingerprint.dimension
            self._call("creating a collection", self._create_chunks, name, dimension)
            count = remote.fill(
                batches,
                dimension,
                lambda chunks, vecs: self._upsert(
                    name, self._points(chunks, vecs, f"rebuild-{generation}", old.avgdl)
                ),
                lambda: self._client.delete_collection(name),
            )
            self._put_state(_StoreState(name, generation, dimension, fingerprint, old.avgdl))
            with contextlib.suppress(Exception):
                self._client.delete_collection(old.chunks)
            if count:
                self.optimize()
            return count

    def index_info(self) -> dict[str, Any]:
        state = self._fresh()
        info = self._call("collection info", self._client.get_collection, state.chunks)
        return {
            "location": self.location,
            "collection": state.chunks,
            "rows": self._count(),
            "dimension": state.dimension,
            "payload_indexes": sorted((info.payload_schema or {}).keys()),
            "vector_search": "hnsw" if self.location.startswith(("http", "qdrant:")) else "exact",
        }

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                with contextlib.suppress(Exception):
                    self._client.close()
