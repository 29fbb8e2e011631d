"""GraphStore: chunks as a Cypher graph on FalkorDB (seed 001's model).

Nodes and relationships are described in :mod:`ragline.store.graph.cypher`, where
every statement lives. Why it is built the way it is:

* **Atomic writes without a journal.** A ``replace_documents`` batch (or a
  delete) is a list of Cypher statements sent in one Redis ``MULTI``/``EXEC``
  transaction: FalkorDB runs them back to back with no other command in between,
  and a writer killed before ``EXEC`` leaves nothing behind. The server must run
  with the append-only file on (``--appendonly yes``; ``--appendfsync always``
  loses no acknowledged write to a kill -9, ``everysec`` at most one second): the
  store refuses a server that reports ``appendonly no``. A half-written
  transaction at the end of the file is dropped when the server loads it.
* **BM25 equal to every other store.** FalkorDB's full-text index (created, with
  field weights, for Cypher users) scores with a coarse TF-IDF, so ranking uses
  postings kept in the graph: ``(:Chunk)-[:HAS_TERM {tf}]->(:Term {k, df})`` per
  field, plus the per-field chunk count and total length in one ``Bm25`` node,
  all maintained inside the same transaction as the chunks. A query computes
  the IDFs from those statistics (:mod:`ragline.text.bm25`) and one Cypher
  statement sums the saturated term weights per chunk and field and keeps the
  best boosted field. Scores are exact at all times (no ``optimize()`` lag).
* **Vector search** uses the HNSW vector index; a filtered search takes
  ``oversample·k`` index candidates and filters them, and when fewer than k pass
  it ranks the filtered chunks exactly, so a filter never shortens top-k.
* While the server reloads its data it answers ``LOADING``, while it prepares
  the fork of an append-only-file rewrite ``BUSY``; calls retry for
  ``loading_wait_s``. A transaction is retried only when the server ran none of
  it; a statement failing inside one raises (Redis does not roll back).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store import remote
from ragline.store.base import (
    CandidateQuery,
    DocumentWrite,
    Ranking,
    StoreAbilities,
    StoreError,
    check_writes,
    listing_order,
    positions,
)
from ragline.store.filters import DOCUMENT_FILTER_FIELDS
from ragline.store.graph import cypher
from ragline.store.graph.schema import (
    GraphState,
    chunk_row,
    document_props,
    next_pairs,
    row_chunk,
    stats_delta,
    term_counts,
    term_key,
)
from ragline.store.remote import RemoteStore
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, FieldBoosts, Filters

_WRITE_BATCH = 128
_PAGE = 1000
_MAX_QUERY_CHARS = 2000


class GraphStore(RemoteStore[GraphState]):
    """The :class:`~ragline.store.base.Store` on a FalkorDB server.

    ``url``: ``redis://host:port`` (or ``falkordb://``); ``graph``: the graph name
    (a rebuild writes ``<graph>_<n>`` and swaps); ``dimension``: vector size of a
    new store.
    """

    def __init__(
        self,
        url: str,
        *,
        dimension: int,
        graph: str = "ragline",
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 200,
        hnsw_ef: int = 200,
        oversample: int = 4,
        boosts: FieldBoosts | None = None,
        loading_wait_s: float = 60.0,
        password: str | None = None,
        bm25_k1: float = bm25.K1,
        bm25_b: float = bm25.B,
    ) -> None:
        remote.check_new_store(dimension, "graph", graph)
        super().__init__()
        parts = urlsplit(url if "://" in url else f"redis://{url}")
        self.url = f"falkordb://{parts.hostname}:{parts.port or 6379}/{graph}"
        self.label = f"FalkorDB {self.url}"
        self.name = graph
        self.hnsw = (hnsw_m, hnsw_ef_construction, hnsw_ef)
        self.oversample = max(1, oversample)
        self.index_boosts = boosts or FieldBoosts()
        self.loading_wait_s = loading_wait_s
        self.k1, self.b = bm25_k1, bm25_b
        self._key = f"ragline:{graph}:store"
        with remote.opening(self.label):
            from falkordb import FalkorDB

            self._db = FalkorDB(
                host=parts.hostname or "127.0.0.1",
                port=parts.port or 6379,
                password=password or parts.password,
                socket_timeout=120,
            )
            self._redis = self._db.connection
            self._check_persistence()
            raw = self._call("reading the store state", self._redis.get, self._key)
            if raw is None:
                existing = {_text(g) for g in self._redis.execute_command("GRAPH.LIST")}
                if graph in existing:
                    raise StoreError(
                        f"FalkorDB {self.url}: graph {graph!r} exists but holds no ragline "
                        "store (no ragline:<graph>:store key); choose another graph name"
                    )
                state = GraphState(graph, 0, dimension, None)
                self._create_graph(state, replace=False)
                self._put_state(state)
            else:
                self._state = GraphState.from_json(raw)

        self.abilities = StoreAbilities(
            related_chunks=self.related_chunks, describe=self.index_info
        )

    # ----------------------------------------------------------------- plumbing

    _passes = (StoreError, ValueError)
    _target = "graph"

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """The shared guarded call, retried while the server is busy loading."""
        import redis

        deadline = time.monotonic() + self.loading_wait_s
        while True:
            try:
                return fn(*args, **kwargs)
            except (redis.exceptions.BusyLoadingError, redis.exceptions.ResponseError) as exc:
                # LOADING (a restart reads its append-only file), BUSY (the server
                # prepares the fork of an AOF rewrite) and EXECABORT (a transaction
                # refused while queueing, so none of it ran) pass: wait and retry.
                busy = isinstance(exc, redis.exceptions.BusyLoadingError) or str(exc).startswith(
                    ("BUSY", "LOADING", "EXECABORT")
                )
                if not busy:
                    raise StoreError(f"{self.label}: {what} failed: {exc}") from exc
                if time.monotonic() > deadline:
                    raise StoreError(f"{self.label}: still busy: {exc}") from exc
                time.sleep(0.1)
            except self._passes:
                raise
            except Exception as exc:
                raise StoreError(f"{self.label}: {what} failed: {exc}") from exc

    def _check_persistence(self) -> None:
        try:
            conf = self._redis.config_get("appendonly")
        except Exception:  # CONFIG disabled (managed servers): trust the operator
            return
        value = conf.get("appendonly") if isinstance(conf, dict) else None
        if value is not None and str(value) == "no":
            raise StoreError(
                f"FalkorDB {self.url}: the server runs without the append-only file, so a "
                "crash loses writes; start it with --appendonly yes --appendfsync always"
            )

    def _fresh(self) -> GraphState:
        if self._closed:
            raise StoreError(f"graph store {self.name!r} is closed")
        raw = self._call("reading the store state", self._redis.get, self._key)
        if raw is None:
            raise StoreError(f"FalkorDB {self.url}: store state {self._key} is gone")
        self._state = GraphState.from_json(raw)
        return self._state

    def _put_state(self, state: GraphState) -> None:
        self._redis.set(self._key, state.to_json())
        self._state = state

    @staticmethod
    def _text(query: str, params: dict[str, Any] | None) -> str:
        from falkordb.helpers import stringify_param_value

        if not params:
            return query
        header = " ".join(f"{k}={stringify_param_value(v)}" for k, v in params.items())
        return f"CYPHER {header} {query}"

    def _query(
        self, what: str, query: str, params: dict[str, Any] | None = None, graph: str = ""
    ) -> list[list[Any]]:
        g = self._db.select_graph(graph or self._state.graph)
        run = g.ro_query if graph == "" and _read_only(query) else g.query
        result = self._call(what, run, query, params)
        return [list(row) for row in result.result_set]

    def _transaction(
        self, what: str, statements: Sequence[tuple[str, dict[str, Any]]], graph: str = ""
    ) -> None:
        """Run the statements in one MULTI/EXEC: all of them or none."""
        name = graph or self._state.graph

        def run() -> None:
            pipe = self._redis.pipeline(transaction=True)
            for query, params in statements:
                pipe.execute_command("GRAPH.QUERY", name, self._text(query, params))
            results = pipe.execute(raise_on_error=False)
            errors = [r for r in results if isinstance(r, Exception)]
            if errors and len(errors) == len(results) and str(errors[0]).startswith("BUSY"):
                # the server refused the whole transaction (an AOF rewrite forks): it ran
                # none of it, so running it again is safe
                raise errors[0]
            if errors:
                raise StoreError(f"FalkorDB {self.url}: {what} failed: {errors[0]}")

        self._call(what, run)

    def _create_graph(self, state: GraphState, replace: bool = True) -> None:
        """Indexes and the statistics node of a new graph (``replace``: drop a leftover
        graph of that name first, e.g. from an interrupted rebuild)."""
        m, efc, ef = self.hnsw
        b = self.index_boosts
        statements = [
            cypher.FALKOR_VECTOR_INDEX.format(
                dimension=state.dimension, m=m, ef_construction=efc, ef=ef
            ),
            cypher.FALKOR_FULLTEXT_INDEX.format(title=b.title, headings=b.headings, text=b.text),
            *cypher.RANGE_INDEXES,
            cypher.INIT_STATS,
        ]
        if replace:
            with contextlib.suppress(Exception):
                self._redis.execute_command("GRAPH.DELETE", state.graph)
        for statement in statements:
            self._query("creating the schema", statement, graph=state.graph)

    # ------------------------------------------------------------------- writes

    @staticmethod
    def _drop_statements(doc_ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
        p = {"doc_ids": doc_ids}
        return [
            (cypher.STATS_DROP, p),
            (cypher.DF_DROP, p),
            (cypher.CHUNKS_DROP, p),
            (cypher.DOCUMENTS_DROP, p),
        ]

    @staticmethod
    def _add_statements(
        chunks: Sequence[Chunk], vectors: Vectors, records: Sequence[DocumentRecord]
    ) -> list[tuple[str, dict[str, Any]]]:
        rows = [chunk_row(c, v) for c, v in zip(chunks, vectors, strict=True)]
        statements: list[tuple[str, dict[str, Any]]] = []
        if rows:
            statements.append((cypher.DF_ADD, {"terms": term_counts(rows)}))
            for part in remote.batches(rows, _WRITE_BATCH):
                statements.append((cypher.CHUNKS_ADD, {"rows": list(part)}))
            statements.append((cypher.STATS_ADD, stats_delta(rows)))
        if records:
            docs = [document_props(r) for r in records]
            statements.append((cypher.DOCUMENTS_ADD, {"docs": docs}))
            statements.append((cypher.CHUNKS_LINK, {"doc_ids": [r.doc_id for r in records]}))
        pairs = next_pairs(chunks)
        if pairs:
            statements.append((cypher.NEXT_LINK, {"pairs": pairs}))
        return statements

    def replace_documents(self, items: Sequence[DocumentWrite]) -> None:
        if not items:
            return
        with self._lock:
            state = self._fresh()
            checked = check_writes(items, state.dimension)
            chunks = [c for item in items for c in item.chunks]
            vectors = (
                np.concatenate(checked) if chunks else np.zeros((0, state.dimension), np.float32)
            )
            statements = self._drop_statements([i.record.doc_id for i in items])
            statements += self._add_statements(chunks, vectors, [i.record for i in items])
            self._transaction("replacing documents", statements)

    def delete_document(self, doc_id: str) -> None:
        with self._lock:
            self._fresh()
            self._transaction(f"deleting document {doc_id!r}", self._drop_statements([doc_id]))

    # -------------------------------------------------------------------- reads

    def documents(self, tenant: str | None = None) -> list[DocumentRecord]:
        where, params = cypher.where_clause(
            {"tenant": tenant} if tenant is not None else None, "d", DOCUMENT_FILTER_FIELDS
        )
        with self._lock:
            self._fresh()
            rows = self._query("reading documents", cypher.fill(cypher.DOCUMENTS, where), params)
        out = [DocumentRecord(*row) for row in rows]
        return listing_order(out)

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        if not ids:
            return {}
        with self._lock:
            self._fresh()
            rows = self._query(
                "reading chunks", cypher.CHUNKS_BY_ID_WITH_VECTOR, {"ids": sorted(set(ids))}
            )
        out = {}
        for row in rows:
            c = row_chunk(row)
            out[c.id] = (c, np.asarray(row[-1], dtype=np.float32))
        return out

    def chunks_by_index(self, doc_id: str, indices: Sequence[int] | None = None) -> list[Chunk]:
        wanted = positions(indices)
        if wanted == []:
            return []
        with self._lock:
            self._fresh()
            rows = self._query(
                "reading neighbours",
                cypher.CHUNKS_BY_INDEX,
                {"doc_id": doc_id, "indices": wanted},  # None: all
            )
        return [row_chunk(r) for r in rows]

    def _count(self, filters: Filters | None = None) -> int:
        where, params = cypher.where_clause(filters)
        with self._lock:
            self._fresh()
            rows = self._query("count", cypher.fill(cypher.COUNT, where), params)
        return int(rows[0][0]) if rows else 0

    def iter_chunks(self, batch_size: int = 1024) -> Iterator[tuple[list[Chunk], Vectors]]:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self._fresh()
        after = ""
        while True:
            with self._lock:
                rows = self._query(
                    "reading chunks", cypher.CHUNKS_PAGE, {"after": after, "limit": batch_size}
                )
            if not rows:
                return
            chunks = [row_chunk(r) for r in rows]
            yield chunks, np.asarray([r[-1] for r in rows], dtype=np.float32)
            after = chunks[-1].id
            if len(rows) < batch_size:
                return

    # ------------------------------------------------------------------- search

    def _vector(
        self, query: Vectors, k: int, filters: Filters | None, *, rows: bool
    ) -> list[tuple[str, float, Chunk | None]]:
        if k <= 0:
            return []
        where, params = cypher.where_clause(filters)
        with self._lock:
            state = self._fresh()
            q = remote.query_vector(query, state.dimension)
            extra = ", " + cypher.CHUNK_RETURN if rows else ""
            params.update(v=[float(x) for x in q], k=k, n=k * self.oversample if where else k)
            found = self._query(
                "vector search", cypher.fill(cypher.FALKOR_VECTOR_SEARCH, where, extra), params
            )
            if where and len(found) < k:
                found = self._query(
                    "vector search", cypher.fill(cypher.FALKOR_VECTOR_EXACT, where, extra), params
                )
        return [(str(r[0]), float(r[1]), row_chunk(r[2:]) if rows else None) for r in found]

    def _cosine_top(self, query: CandidateQuery) -> Ranking:
        if query.vector is None:
            return []
        found = self._vector(query.vector, query.k, query.filters, rows=False)
        return [(cid, s) for cid, s, _ in found]

    def _bm25_top(self, query: CandidateQuery) -> Ranking:
        where, params = cypher.where_clause(query.filters)  # refuse a bad filter first
        counts = bm25.query_counts((query.text or "")[:_MAX_QUERY_CHARS])
        b, k = query.boosts or FieldBoosts(), query.k
        weights = (b.title, b.headings, b.text)
        if k <= 0 or not counts:
            return []
        keys = {
            term_key(f, t): (f, n) for t, n in counts.items() for f in range(3) if weights[f] > 0
        }
        if not keys:
            return []
        with self._lock:
            self._fresh()
            (stats,) = self._query("BM25 statistics", cypher.BM25_STATS, {"keys": sorted(keys)})
            n_t = [(int(stats[2 * f]), int(stats[2 * f + 1])) for f in range(3)]
            q = []
            for key, df in stats[6]:
                if key is None:
                    continue
                f, count = keys[str(key)]
                n, total = n_t[f]
                if n <= 0 or int(df) <= 0:
                    continue
                q.append(
                    {
                        "k": str(key),
                        "f": f,
                        "w": count * bm25.idf(int(df), n) * (self.k1 + 1.0),
                        "a": self.k1 * (1.0 - self.b),
                        "b": self.k1 * self.b / (total / n),
                        "boost": weights[f],
                    }
                )
            if not q:
                return []
            params.update(q=q, k=k)
            rows = self._query("keyword search", cypher.fill(cypher.BM25_SEARCH, where), params)
        return [(str(cid), float(s)) for cid, s in rows]

    # ---------------------------------------------------------------- expansion

    def related_chunks(
        self, ids: Sequence[str], window: int, same_section: bool, span: int
    ) -> dict[str, list[Chunk]]:
        """For each hit id, the chunks NEXT_CHUNK reaches within ``window`` steps and
        (``same_section``) its section's chunks within ``span``: one Cypher query."""
        if not ids or (window < 1 and not same_section):
            return {}
        query = cypher.fill(cypher.EXPAND, window=max(1, window))
        params = {"ids": list(dict.fromkeys(ids)), "section": same_section, "span": span}
        with self._lock:
            self._fresh()
            rows = self._query("graph expansion", query, params)
        out: dict[str, list[Chunk]] = {}
        for row in rows:
            out.setdefault(str(row[0]), []).append(row_chunk(row[1:]))
        return out

    # -------------------------------------------------------------- maintenance

    def optimize(self) -> None:
        """Drop terms no chunk holds any more (statistics are always current)."""
        with self._lock:
            self._fresh()
            self._query("pruning terms", cypher.TERMS_PRUNE)

    def _create_next(self, old: GraphState, fingerprint: ModelFingerprint) -> GraphState:
        number = old.number + 1
        new = GraphState(f"{self.name}_{number}", number, fingerprint.dimension, fingerprint)
        self._create_graph(new)
        return new

    def _fill_batch(self, new: GraphState, chunks: list[Chunk], vectors: Vectors) -> None:
        self._transaction("rebuilding", self._add_statements(chunks, vectors, []), graph=new.graph)

    def _drop(self, state: GraphState) -> None:
        self._redis.execute_command("GRAPH.DELETE", state.graph)

    def _fill_rest(self, new: GraphState) -> None:
        """The live graph's document records into the rebuilt one, linked to its chunks."""
        records = self.documents()
        if records:
            self._transaction(
                "rebuilding",
                [
                    (cypher.DOCUMENTS_ADD, {"docs": [document_props(r) for r in records]}),
                    (cypher.CHUNKS_LINK, {"doc_ids": [r.doc_id for r in records]}),
                ],
                graph=new.graph,
            )

    def index_info(self) -> dict[str, Any]:
        state = self._fresh()
        return {
            "location": self.url,
            "graph": state.graph,
            "rows": self._count(),
            "dimension": state.dimension,
            "vector_search": "hnsw",
        }

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            self._redis.close()


def _read_only(query: str) -> bool:
    head = query.lstrip().upper()
    return not any(w in head for w in ("CREATE", "MERGE", "DELETE", " SET ", "\nSET "))


def _text(value: object) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
