"""The journalled writes of QdrantStore (see the package docstring): a ``write``
point first, then the new chunks, then the old ones dropped and the records
written; ``_recover`` rolls an interrupted write forward or back."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_client import models

from ragline.embed.base import Vectors
from ragline.store import remote
from ragline.store.base import (
    DOCUMENT_COLUMNS,
    DocumentWrite,
    check_writes,
)
from ragline.store.qdrant.connection import QdrantConnection
from ragline.store.qdrant.points import (
    DENSE,
    NS,
    UPSERT_BATCH,
    StoreState,
    chunk_payload,
    chunk_point_id,
    document_point_id,
    sparse_field_vectors,
    to_qdrant_filter,
)
from ragline.text import bm25
from ragline.types import Chunk


class QdrantWrites(QdrantConnection):
    """Writes and crash recovery on top of the connection."""

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
                    payload=chunk_payload(c, write_id, lengths),
                )
            )
        return points

    def _upsert(self, collection: str, points: list[models.PointStruct]) -> None:
        for part in remote.batches(points, UPSERT_BATCH):
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
            journal_id = str(uuid.uuid5(NS, f"write\x00{write_id}"))
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
                self._put_avgdl(state, avgdl)

    def _put_avgdl(self, state: StoreState, avgdl: dict[str, float]) -> None:
        """The store point with new BM25 average field lengths (a write, optimize())."""
        new = dataclasses.replace(state, avgdl=avgdl)
        self._call("recording BM25 statistics", self._put_state, new)

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
