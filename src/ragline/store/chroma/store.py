"""ChromaStore: chunks in ChromaDB (a ``chroma run`` server, or in-process in a folder).

Layout, for a store named ``<c>``::

    <c>_chunks[_<n>]  one record per chunk: its embedding (cosine HNSW), the text as
                      the record's document, every other Chunk field as metadata
                      plus the ``write`` that stored it; record id ``<write>:<chunk id>``
    <c>_meta          the ``store`` record (format, live chunks collection, model
                      fingerprint, generation), one ``doc:<id>`` record per ingested
                      file and ``write:<id>`` journal records (1-dim dummy embeddings)
    TermIndex file    BM25 postings and statistics (SQLite, :mod:`.bm25`), a cache of
                      the chunks collection tagged with the generation it mirrors

Why it is built the way it is:

* Embeddings are always passed (``embedding_function=None``): Chroma's default
  embedding function would try to download a model.
* Keyword search ranks with ragline's BM25 (:mod:`ragline.text.bm25`) from the
  SQLite term index, because Chroma ranks no keyword query outside its cloud.
  Every write moves the store to a new *generation* (a random token) recorded
  both in Chroma's ``store`` record and in the term index; a read that finds them
  different rebuilds the term index from the collection first. So the keyword
  side follows whatever is in Chroma, even after another client wrote or a crash
  fell between the two.
* Writes are journalled, because Chroma has no multi-record transaction (the
  Qdrant store's scheme): ``replace_documents`` records a ``write`` journal (the
  documents, their records, the new chunk count, the next generation), adds the
  new chunks under new record ids tagged with the write id, deletes the
  documents' other chunks with one filtered delete, writes the records, updates
  the term index, moves the generation and drops the journal. Opening the store
  (and every write) finishes what a crash interrupted: all new chunks present →
  roll forward, otherwise roll back (delete the partial new ones). So after a
  crash each document has its old or its new chunks, never both.
* Filters become Chroma ``where`` clauses (pre-filters) and, on the keyword side,
  SQL over the term index's copy of the filter columns: top-k stays exact.
* Local mode (``PersistentClient``) is Chroma's own engine in-process; the term
  index then sits in the same folder. For a server it is a file on the client
  (``RAGLINE_INDEX_DIR/chroma/…`` by default), rebuilt from the server when stale.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store import remote
from ragline.store.base import (
    DOCUMENT_COLUMNS,
    CandidateQuery,
    DocumentWrite,
    Ranking,
    StoreAbilities,
    StoreError,
    check_writes,
    listing_order,
    positions,
)
from ragline.store.chroma.bm25 import TermIndex
from ragline.store.chroma.client import (
    chunk_metadata,
    in_chroma,
    make_client,
    metadata_chunk,
    to_where,
)
from ragline.store.chroma.journal import Journal
from ragline.store.filters import DOCUMENT_FILTER_FIELDS, to_sql_predicate
from ragline.store.remote import RemoteStore
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, Filters

FORMAT_VERSION = 1
_STORE_ID = "store"
_DUMMY = [1.0]  # the meta collection's records carry no meaning in their vector
_ADD_BATCH = 256
_GET_BATCH = 1000
_MAX_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class _State:
    chunks: str
    number: int
    dimension: int
    fingerprint: ModelFingerprint | None
    generation: str

    def metadata(self) -> dict[str, Any]:
        return {
            "kind": "store",
            "format": FORMAT_VERSION,
            "chunks": self.chunks,
            "number": self.number,
            "dimension": self.dimension,
            "fingerprint": json.dumps(self.fingerprint.to_dict()) if self.fingerprint else "",
            "generation": self.generation,
        }

    @classmethod
    def from_metadata(cls, m: Mapping[str, Any]) -> _State:
        remote.check_format("Chroma", m.get("format"), FORMAT_VERSION)
        fp = str(m.get("fingerprint") or "")
        return cls(
            chunks=str(m["chunks"]),
            number=int(m["number"]),
            dimension=int(m["dimension"]),
            fingerprint=ModelFingerprint.from_dict(json.loads(fp)) if fp else None,
            generation=str(m["generation"]),
        )

    def with_(self, **changes: Any) -> _State:
        return dataclasses.replace(self, **changes)


def _new_token() -> str:
    return uuid.uuid4().hex


class ChromaStore(RemoteStore[_State]):
    """The :class:`~ragline.store.base.Store` on ChromaDB (server or local folder).

    ``location``: ``http://host:port`` or a folder; ``collection``: name prefix of
    the store's collections (Chroma wants at least 3 characters); ``terms_path``:
    the SQLite term index (default: ``<folder>/ragline-bm25.sqlite`` in local mode,
    required for a server); ``hnsw_ef``: HNSW search breadth for new collections;
    ``oversample``: unfiltered candidates per wanted hit of a filtered search.
    """

    def __init__(
        self,
        location: str | Path,
        *,
        dimension: int,
        collection: str = "ragline",
        terms_path: Path | None = None,
        hnsw_ef: int = 128,
        oversample: int = 4,
        bm25_k1: float = bm25.K1,
        bm25_b: float = bm25.B,
    ) -> None:
        remote.check_new_store(dimension, "collection", collection)
        super().__init__()
        self.location = str(location)
        self.label = f"Chroma {self.location}"
        self.name = collection
        self.hnsw_ef = hnsw_ef
        self.oversample = max(1, oversample)
        self._server = self.location.startswith(("http://", "https://"))
        if terms_path is None:
            if self._server:
                raise ValueError("a Chroma server store needs terms_path (its BM25 term index)")
            terms_path = Path(self.location) / f"ragline-bm25-{collection}.sqlite"
        self._collections: dict[str, Any] = {}
        with remote.opening(f"{self.label} ({collection})"):
            self._client = make_client(location)
            self._meta = self._client.get_or_create_collection(
                f"{collection}_meta", embedding_function=None
            )
            found = self._meta.get(ids=[_STORE_ID], include=["metadatas"])
            created = not found["ids"]
            if created:
                state = _State(f"{collection}_chunks", 0, dimension, None, _new_token())
                self._create_chunks(state.chunks)
                self._put_state(state)
            else:
                self._state = _State.from_metadata(found["metadatas"][0])
            self.terms = TermIndex(terms_path, k1=bm25_k1, b=bm25_b)
            if created:
                # The new collection is empty, so is its term index: mark it current, or
                # every write would skip the term index and the first read rescan it all.
                self.terms.rebuild((), self._state.generation)
            self._recover()

        self.abilities = StoreAbilities(describe=self.index_info)

    # ----------------------------------------------------------------- plumbing

    _passes = (StoreError, ValueError)  # a filter Chroma cannot read names its field

    def _fresh(self) -> _State:
        """The store record as it is now (another client may have written)."""
        if self._closed:
            raise StoreError(f"Chroma store {self.name!r} is closed")
        found = self._call("reading the store record", self._meta.get, ids=[_STORE_ID])
        if not found["ids"]:
            raise StoreError(f"Chroma {self.location}: {self.name}_meta lost its store record")
        self._state = _State.from_metadata(found["metadatas"][0])
        return self._state

    def _put_state(self, state: _State) -> None:
        self._meta.upsert(ids=[_STORE_ID], embeddings=[_DUMMY], metadatas=[state.metadata()])
        self._state = state

    def _create_chunks(self, name: str) -> Any:
        with contextlib.suppress(Exception):
            self._client.delete_collection(name)
        col = self._client.create_collection(
            name,
            configuration={"hnsw": {"space": "cosine", "ef_search": self.hnsw_ef}},
            embedding_function=None,
        )
        self._collections[name] = col
        return col

    def _chunks(self, name: str) -> Any:
        col = self._collections.get(name)
        if col is None:
            col = self._call(
                "opening the chunks collection",
                self._client.get_collection,
                name,
                embedding_function=None,
            )
            self._collections = {name: col}
        return col

    def _terms(self, state: _State | None = None) -> TermIndex:
        """The term index, rebuilt from Chroma first when it mirrors another generation
        (``state``: the store record just read, to save a round trip)."""
        state = state or self._fresh()
        if self.terms.generation() != state.generation:
            col = self._chunks(state.chunks)
            batches = ([c for c, _ in b] for b in self._scan(col, None, with_vectors=False))
            self.terms.rebuild(batches, state.generation)
        return self.terms

    def _scan(
        self, col: Any, where: dict[str, Any] | None, *, with_vectors: bool, batch: int = _GET_BATCH
    ) -> Iterator[list[tuple[Chunk, Any]]]:
        """Records matching ``where`` as (chunk, embedding or None) batches."""
        include = ["metadatas", "documents"] + (["embeddings"] if with_vectors else [])
        offset = 0
        while True:
            got = self._call(
                "reading chunks", col.get, where=where, limit=batch, offset=offset, include=include
            )
            if not got["ids"]:
                return
            embeddings = got.get("embeddings") if with_vectors else None
            yield [
                (
                    metadata_chunk(m, d),
                    None if embeddings is None else embeddings[i],
                )
                for i, (m, d) in enumerate(zip(got["metadatas"], got["documents"], strict=True))
            ]
            if len(got["ids"]) < batch:
                return
            offset += batch

    # ------------------------------------------------------------------- writes

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        if not items:
            return
        with self._lock:
            state = self._fresh()
            checked = check_writes(items, state.dimension)
            self._recover()
            journal = Journal(
                write=_new_token(),
                generation=_new_token(),
                doc_ids=tuple(i.record.doc_id for i in items),
                records=tuple(i.record for i in items),
                drop=(),
                chunks=sum(len(i.chunks) for i in items),
            )
            self._run(state, journal, [(i.chunks, v) for i, v in zip(items, checked, strict=True)])

    def delete_document(self, doc_id: str) -> None:
        with self._lock:
            state = self._fresh()
            self._recover()
            journal = Journal(_new_token(), _new_token(), (doc_id,), (), (doc_id,), 0)
            self._run(state, journal, [])

    def _run(
        self, state: _State, journal: Journal, parts: Sequence[tuple[Sequence[Chunk], Vectors]]
    ) -> None:
        jid = f"write:{journal.write}"
        self._call(
            "opening the journal",
            self._meta.upsert,
            ids=[jid],
            embeddings=[_DUMMY],
            metadatas=[journal.to_metadata()],
        )
        col = self._chunks(state.chunks)
        for chunks, vectors in parts:
            self._add(col, chunks, vectors, journal.write)
        self._finish(state, jid, journal, [c for chunks, _ in parts for c in chunks])

    def _add(self, col: Any, chunks: Sequence[Chunk], vectors: Vectors, write_id: str) -> None:
        for start in range(0, len(chunks), _ADD_BATCH):
            part = chunks[start : start + _ADD_BATCH]
            self._call(
                "adding chunks",
                col.add,
                ids=[f"{write_id}:{c.id}" for c in part],
                embeddings=np.asarray(vectors[start : start + _ADD_BATCH], dtype=np.float32),
                documents=[c.text for c in part],
                metadatas=[chunk_metadata(c, write_id) for c in part],
            )

    def _finish(
        self, state: _State, jid: str, journal: Journal, chunks: Sequence[Chunk] | None
    ) -> None:
        """Roll a complete write forward: drop the documents' other chunks, write the
        records, bring the term index along (rebuilt when ``chunks`` is unknown),
        move the generation, close the journal."""
        col = self._chunks(state.chunks)
        if journal.doc_ids:
            self._call(
                "deleting replaced chunks",
                col.delete,
                where={
                    "$and": [
                        {"doc_id": {"$in": list(journal.doc_ids)}},
                        {"write": {"$ne": journal.write}},
                    ]
                },
            )
        if journal.records:
            self._call(
                "writing document records",
                self._meta.upsert,
                ids=[f"doc:{r.doc_id}" for r in journal.records],
                embeddings=[_DUMMY] * len(journal.records),
                metadatas=[{"kind": "document", **asdict(r)} for r in journal.records],
            )
        if journal.drop:
            self._call(
                "deleting document records",
                self._meta.delete,
                ids=[f"doc:{d}" for d in journal.drop],
            )
        if chunks is not None and self.terms.generation() == state.generation:
            self.terms.apply(journal.doc_ids, chunks, journal.generation)
        new = state.with_(generation=journal.generation)
        self._call("moving the generation", self._put_state, new)
        self._call("closing the journal", self._meta.delete, ids=[jid])

    def _recover(self) -> None:
        """Finish or undo writes a crash interrupted (journal records left behind)."""
        found = self._call("reading journals", self._meta.get, where={"kind": "write"})
        if not found["ids"]:
            return
        state = self._state
        col = self._chunks(state.chunks)
        for jid, meta in zip(found["ids"], found["metadatas"], strict=True):
            journal = Journal.from_metadata(meta)
            mine = {"write": journal.write}
            present = len(self._call("counting a write", col.get, where=mine, include=[])["ids"])
            if present == journal.chunks:
                self._finish(state, jid, journal, None)
                state = self._state
            else:
                self._call("rolling back an interrupted write", col.delete, where=mine)
                self._call("closing the journal", self._meta.delete, ids=[jid])

    # -------------------------------------------------------------------- reads

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        extra = {"tenant": tenant} if tenant is not None else None
        to_sql_predicate(extra, DOCUMENT_FILTER_FIELDS)
        where: dict[str, Any] = {"kind": "document"}
        if extra:
            where = {"$and": [where, extra]}
        with self._lock:
            self._fresh()
            got = self._call("reading documents", self._meta.get, where=where)
        out = [DocumentRecord(**{k: m[k] for k in DOCUMENT_COLUMNS}) for m in got["metadatas"]]
        return listing_order(out)

    def _get(
        self, where: dict[str, Any] | None, with_vectors: bool = False
    ) -> list[tuple[Chunk, Any]]:
        col = self._chunks(self._fresh().chunks)
        return [
            pair for batch in self._scan(col, where, with_vectors=with_vectors) for pair in batch
        ]

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        if not ids:
            return {}
        with self._lock:
            pairs = self._get({"id": {"$in": sorted(set(ids))}}, with_vectors=True)
        return {c.id: (c, np.asarray(v, dtype=np.float32)) for c, v in pairs}

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        wanted = positions(indices)
        if wanted == []:
            return []
        with self._lock:
            where: dict[str, Any] = {"doc_id": doc_id}
            if wanted is not None:
                where = {"$and": [where, {"chunk_index": {"$in": wanted}}]}
            pairs = self._get(where)
        return sorted((c for c, _ in pairs), key=lambda c: c.chunk_index)

    def _count(self, filters: Filters | None = None) -> int:
        with self._lock:
            col = self._chunks(self._fresh().chunks)
            if not filters:
                return int(self._call("count", col.count))
            if not in_chroma(filters):  # the term index holds every chunk's metadata
                return self._terms(self._state).count_passing(filters)
            got = self._call("count", col.get, where=to_where(filters), include=[])
            return len(got["ids"])

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        col = self._chunks(self._fresh().chunks)
        for batch in self._scan(col, None, with_vectors=True, batch=batch_size):
            chunks = [c for c, _ in batch]
            vecs = np.asarray([v for _, v in batch], dtype=np.float32)
            yield chunks, vecs

    # ------------------------------------------------------------------- search

    def _cosine_top(self, cq: CandidateQuery) -> Ranking:
        """Ids come from the record ids (``<write>:<chunk id>``): no metadata is read.

        Chroma's filtered HNSW search is slow when the filter passes most chunks
        (measured: 3 ms unfiltered, 73 ms with a tenant filter that passes all of
        10k chunks, k = 200), and every search carries a tenant filter. So a filtered
        search first takes the ``oversample·k`` nearest chunks unfiltered and keeps
        those the term index's copy of the filter columns passes; only when fewer
        than k pass (and the collection holds more) does Chroma filter itself.
        """
        query, k, filters = cq.vector, cq.k, cq.filters
        if query is None or k <= 0:
            return []
        chroma_says_it = in_chroma(filters)  # a bad filter fails before any search
        if filters:
            n = k * self.oversample
            while True:
                pairs = self._pairs(self._query_vector(query, n, None, []))
                with self._lock:
                    terms = self._terms(self._state)
                    allowed = terms.passing([cid for cid, _ in pairs], filters)
                kept = [p for p in pairs if p[0] in allowed]
                if len(kept) >= k or len(pairs) < n:
                    return kept[:k]
                if chroma_says_it:
                    break
                # Chroma's where has no $not/$exists/front matter: widen the pool
                # until k pass or the whole collection was ranked (exact either way)
                n *= 4
        return self._pairs(self._query_vector(query, k, filters, []))

    @staticmethod
    def _pairs(got: Mapping[str, Any]) -> list[tuple[str, float]]:
        pairs = [
            (rid.split(":", 1)[1], 1.0 - float(dist))
            for rid, dist in zip(got["ids"][0], got["distances"][0], strict=True)
        ]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs

    def _query_vector(
        self, query: Vectors, k: int, filters: Filters | None, include: list[str]
    ) -> dict[str, Any]:
        if k <= 0:
            return {"ids": [[]], "distances": [[]], "metadatas": [[]], "documents": [[]]}
        where = to_where(filters)
        with self._lock:
            state = self._fresh()
            q = remote.query_vector(query, state.dimension)
            col = self._chunks(state.chunks)
            got: dict[str, Any] = self._call(
                "vector search",
                col.query,
                query_embeddings=[q],
                n_results=k,
                where=where,
                include=["distances", *include],
            )
        return got

    def _bm25_top(self, query: CandidateQuery) -> Ranking:
        if query.k <= 0:
            return []
        in_chroma(query.filters)  # refuse a bad filter even when the query has no term
        text = (query.text or "")[:_MAX_QUERY_CHARS]
        with self._lock:
            return self._terms().search(text, query.k, query.filters, query.boosts)

    # -------------------------------------------------------------- maintenance

    def optimize(self) -> None:
        """Finish interrupted writes and bring the term index up to date."""
        with self._lock:
            self._fresh()
            self._recover()
            self._terms()

    def _create_next(self, old: _State, fingerprint: ModelFingerprint) -> _State:
        number = old.number + 1
        name = f"{self.name}_chunks_{number}"
        self._call("creating a collection", self._create_chunks, name)
        return _State(name, number, fingerprint.dimension, fingerprint, _new_token())

    def _fill_batch(self, new: _State, chunks: list[Chunk], vectors: Vectors) -> None:
        self._add(self._chunks(new.chunks), chunks, vectors, f"rebuild-{new.number}")

    def _drop(self, state: _State) -> None:
        self._client.delete_collection(state.chunks)

    def _rebuilt(self, count: int) -> None:
        self._terms()

    def index_info(self) -> dict[str, Any]:
        state = self._fresh()
        return {
            "location": self.location,
            "collection": state.chunks,
            "rows": self._count(),
            "dimension": state.dimension,
            "terms": str(self.terms.path),
            "vector_search": "hnsw",
        }

    def _release(self) -> None:
        self.terms.close()
