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

from typing import TYPE_CHECKING

from ragline.lazy import lazy_getattr

if TYPE_CHECKING:
    from ragline.store.qdrant.client import (
        BOOL_INDEXES,
        INT_INDEXES,
        KEYWORD_INDEXES,
        local_folder,
        make_client,
    )
    from ragline.store.qdrant.points import (
        DENSE,
        SPARSE,
        chunk_point_id,
        document_point_id,
        sparse_field_vectors,
        to_qdrant_filter,
    )
    from ragline.store.qdrant.store import QdrantStore

# Imported on first use: qdrant-client is heavy, and ``store.url`` reads ``.address``.
_LOCATIONS = {
    "BOOL_INDEXES": "ragline.store.qdrant.client",
    "INT_INDEXES": "ragline.store.qdrant.client",
    "KEYWORD_INDEXES": "ragline.store.qdrant.client",
    "local_folder": "ragline.store.qdrant.client",
    "make_client": "ragline.store.qdrant.client",
    "DENSE": "ragline.store.qdrant.points",
    "SPARSE": "ragline.store.qdrant.points",
    "chunk_point_id": "ragline.store.qdrant.points",
    "document_point_id": "ragline.store.qdrant.points",
    "sparse_field_vectors": "ragline.store.qdrant.points",
    "to_qdrant_filter": "ragline.store.qdrant.points",
    "QdrantStore": "ragline.store.qdrant.store",
}
__getattr__ = lazy_getattr(__name__, _LOCATIONS, globals())

__all__ = [
    "BOOL_INDEXES",
    "DENSE",
    "INT_INDEXES",
    "KEYWORD_INDEXES",
    "SPARSE",
    "QdrantStore",
    "chunk_point_id",
    "document_point_id",
    "local_folder",
    "make_client",
    "sparse_field_vectors",
    "to_qdrant_filter",
]
