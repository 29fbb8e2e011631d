"""ChromaStore specifics (local mode and a real `chroma run` server): the BM25 term
index follows the collection (another client's writes, a lost file), an
interrupted write left behind is rolled back on open, and the collection's HNSW
index uses cosine space."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragline.store.base import DocumentWrite
from ragline.store.chroma import ChromaStore
from ragline.store.chroma.journal import Journal
from ragline.store.reads import keyword_search
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


def put(store: ChromaStore, doc: str, texts: list[str]) -> None:
    chunks = [chunk(doc, i, t) for i, t in enumerate(texts)]
    rec = DocumentRecord(doc, "t", f"{doc}.md", "f", len(chunks), 3, "c", "Notes", "markdown", "x")
    vecs = np.random.default_rng(len(texts)).standard_normal((len(chunks), DIM)).astype(np.float32)
    store.replace_documents([DocumentWrite(rec, chunks, vecs)])


def scores(store: ChromaStore, query: str) -> list[tuple[str, float]]:
    return [(h.chunk.id, round(h.keyword_score or 0, 6)) for h in keyword_search(store, query, 10)]


def test_term_index_follows_another_clients_writes(chroma_url: str, tmp_path: Path) -> None:
    one = ChromaStore(chroma_url, dimension=DIM, collection="shared", terms_path=tmp_path / "a")
    two = ChromaStore(chroma_url, dimension=DIM, collection="shared", terms_path=tmp_path / "b")
    put(one, "a", ["gradient descent moves downhill", "attention heads"])
    assert [cid for cid, _ in scores(two, "gradient")] == ["t/a/0"]  # rebuilt from Chroma
    put(two, "b", ["gradient clipping", "gradient noise and gradient norms"])
    assert scores(one, "gradient") == scores(two, "gradient")
    assert len(scores(one, "gradient")) == 3
    one.delete_document("b")
    assert [cid for cid, _ in scores(two, "gradient")] == ["t/a/0"]
    one.close()
    two.close()


def test_a_lost_term_index_is_rebuilt(tmp_path: Path) -> None:
    store = ChromaStore(tmp_path / "c", dimension=DIM, collection="kb")
    put(store, "a", ["gradient descent moves downhill", "attention heads attend"])
    before = scores(store, "gradient attention")
    path = store.terms.path
    store.close()
    path.unlink()
    again = ChromaStore(tmp_path / "c", dimension=DIM, collection="kb")
    assert scores(again, "gradient attention") == before
    again.close()


def test_a_new_stores_term_index_follows_its_writes(tmp_path: Path) -> None:
    """Writes to a new store update its term index in place: no search rescans Chroma."""
    store = ChromaStore(tmp_path / "c", dimension=DIM, collection="kb")
    put(store, "a", ["gradient descent moves downhill", "attention heads attend"])
    put(store, "b", ["gradient clipping"])
    assert store.terms.generation() == store._fresh().generation

    def no_rebuild(*args: object, **kwargs: object) -> None:
        raise AssertionError("the term index was rebuilt from the collection")

    store.terms.rebuild = no_rebuild  # type: ignore[method-assign]
    assert [cid for cid, _ in scores(store, "gradient")] == ["t/b/0", "t/a/0"]
    store.close()


def test_interrupted_write_is_rolled_back_on_open(tmp_path: Path) -> None:
    store = ChromaStore(tmp_path / "c", dimension=DIM, collection="kb")
    put(store, "a", ["old text one", "old text two"])
    state = store._fresh()
    # a crash after the journal and one of two new chunks: the leftovers
    journal = Journal("w1", "g1", ("a",), (), (), 2)
    store._meta.upsert(ids=["write:w1"], embeddings=[[1.0]], metadatas=[journal.to_metadata()])
    col = store._chunks(state.chunks)
    store._add(col, [chunk("a", 0, "new text")], np.ones((1, DIM), np.float32), "w1")
    assert store.info().chunks == 3
    store.close()
    again = ChromaStore(tmp_path / "c", dimension=DIM, collection="kb")
    assert sorted(c.text for b, _ in again.iter_chunks() for c in b) == [
        "old text one",
        "old text two",
    ]
    assert [cid for cid, _ in scores(again, "new")] == []
    assert again._chunks(state.chunks).configuration_json["hnsw"]["space"] == "cosine"
    again.close()
