"""QdrantStore specifics (local mode): collection layout, IDF modifier, reopening,
the sparse-vector scores, crash recovery from a left-behind journal, and the
folder going away under an open store."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import models

from ragline.store import qdrant
from ragline.store.base import DocumentWrite, StoreError
from ragline.store.qdrant import SPARSE, QdrantStore, make_client
from ragline.store.reads import keyword_search
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord

DIM = 8


def chunk(doc: str, i: int, text: str) -> Chunk:
    return Chunk(
        id=f"t/{doc}/{i}", doc_id=doc, tenant="t", source=f"{doc}.md", title="Notes",
        chapter="c", section="S", heading_path=("Notes", "S"), url="", anchor="s",
        chunk_index=i, start_char=0, end_char=len(text), token_count=3, word_count=3,
        has_code=False, has_equations=False, content_hash=f"h-{doc}-{i}-{text}",
        created_at="2024-01-01T00:00:00Z", text=text,
    )  # fmt: skip


def put(store: QdrantStore, doc: str, texts: list[str]) -> None:
    chunks = [chunk(doc, i, t) for i, t in enumerate(texts)]
    rec = DocumentRecord(doc, "t", f"{doc}.md", "f", len(chunks), 3, "c", "Notes", "markdown", "x")
    vecs = np.random.default_rng(len(texts)).standard_normal((len(chunks), DIM)).astype(np.float32)
    store.replace_documents([DocumentWrite(rec, chunks, vecs)])


def test_collection_has_idf_sparse_vectors_and_payload_indexes(tmp_path: Path) -> None:
    store = QdrantStore(tmp_path / "q", dimension=DIM, collection="kb")
    put(store, "a", ["gradient descent", "attention heads"])
    state = store._fresh()
    store.close()
    client = make_client(tmp_path / "q")
    info = client.get_collection(state.chunks)
    sparse = info.config.params.sparse_vectors or {}
    assert set(sparse) == set(SPARSE.values())
    assert all(p.modifier == models.Modifier.IDF for p in sparse.values())
    dense = info.config.params.vectors
    assert isinstance(dense, dict) and dense["dense"].distance == models.Distance.COSINE
    # local mode keeps no payload indexes (it scans); what a server gets asked for:
    planned = set(qdrant.KEYWORD_INDEXES + qdrant.BOOL_INDEXES + qdrant.INT_INDEXES)
    assert {"tenant", "doc_id", "chapter", "has_code", "has_equations", "page"} <= planned
    client.close()


def test_reopening_keeps_chunks_and_statistics(tmp_path: Path) -> None:
    store = QdrantStore(tmp_path / "q", dimension=DIM, collection="kb")
    put(store, "a", ["gradient descent moves downhill", "attention"])
    store.optimize()
    before = keyword_search(store, "gradient", 5)
    store.close()
    with pytest.raises(StoreError):
        store.info()
    again = QdrantStore(tmp_path / "q", dimension=DIM, collection="kb")
    assert again.info().chunks == 2
    assert [(h.chunk.id, h.keyword_score) for h in keyword_search(again, "gradient", 5)] == [
        (h.chunk.id, h.keyword_score) for h in before
    ]
    again.close()


def test_sparse_scores_are_idf_times_stored_tf_weight(tmp_path: Path) -> None:
    store = QdrantStore(tmp_path / "q", dimension=DIM, collection="kb")
    put(store, "a", ["gradient gradient descent", "descent only here", "nothing relevant"])
    store.optimize()
    terms = [bm25.FieldTerms.of(t) for t in
             ["gradient gradient descent", "descent only here", "nothing relevant"]]  # fmt: skip
    stats = bm25.FieldStats.of(terms)
    expected = bm25.field_score(["gradient"], terms[0], stats.df, stats.n, stats.avgdl)
    hits = keyword_search(store, "gradient", 5, boosts=None)
    # title and headings are the same for every chunk and never match "gradient"
    assert [h.chunk.id for h in hits] == ["t/a/0"]
    assert hits[0].keyword_score == pytest.approx(expected, rel=1e-5)
    store.close()


def test_interrupted_write_is_rolled_back_on_open(tmp_path: Path) -> None:
    store = QdrantStore(tmp_path / "q", dimension=DIM, collection="kb")
    put(store, "a", ["old text one", "old text two"])
    state = store._fresh()
    # a crash after the journal and part of the new chunks: simulate the leftovers
    journal = {"kind": "write", "write": "w1", "doc_ids": ["a"], "chunks": 2, "records": []}
    store._client.upsert(store._meta, [models.PointStruct(id=1, vector={}, payload=journal)])
    (point,) = store._points([chunk("a", 0, "new text")], np.ones((1, DIM), np.float32), "w1", {})
    point.payload = {**(point.payload or {}), "write": "w1"}
    store._client.upsert(state.chunks, [point])
    assert store.info().chunks == 3
    store.close()
    again = QdrantStore(tmp_path / "q", dimension=DIM, collection="kb")
    assert sorted(c.text for b, _ in again.iter_chunks() for c in b) == [
        "old text one",
        "old text two",
    ]
    again.close()


def test_local_folder_moved_away_fails_then_comes_back(tmp_path: Path) -> None:
    folder, aside = tmp_path / "q", tmp_path / "aside"
    store = QdrantStore(folder, dimension=DIM, collection="kb")
    put(store, "a", ["gradient descent", "attention heads"])
    folder.rename(aside)
    with pytest.raises(StoreError, match="unavailable"):
        store.info()
    with pytest.raises(StoreError, match="unavailable"):
        put(store, "b", ["written into a folder that is gone"])
    aside.rename(folder)
    assert store.info().chunks == 2
    assert [r.doc_id for r in store.documents()] == ["a"]
    store.close()


def test_local_folder_replaced_by_a_copy_is_reopened(tmp_path: Path) -> None:
    folder, backup = tmp_path / "q", tmp_path / "backup"
    store = QdrantStore(folder, dimension=DIM, collection="kb")
    put(store, "a", ["gradient descent"])
    folder.rename(backup)
    shutil.copytree(backup, folder)
    put(store, "b", ["attention heads", "layer norm"])  # lands in the copy, not the backup
    assert store.info().chunks == 3
    store.close()
    reopened = QdrantStore(folder, dimension=DIM, collection="kb")
    assert sorted(r.doc_id for r in reopened.documents()) == ["a", "b"]
    reopened.close()
    old = QdrantStore(backup, dimension=DIM, collection="kb")
    assert [r.doc_id for r in old.documents()] == ["a"]
    old.close()
