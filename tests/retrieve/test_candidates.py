"""Ranking by id on a CandidateStore (LanceStore): the same results as whole-chunk
searches, with chunks loaded only for the hits returned."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragline.embed.base import Embedder, Vectors
from ragline.retrieve.retriever import Retriever, as_candidate_store, load_chunks
from ragline.settings import Settings
from ragline.store.base import CandidateStore, DocumentWrite, FieldBoosts, Store
from ragline.store.lance import LanceStore
from ragline.types import Chunk, DocumentRecord, Filters, Hit

TEXTS = {
    "volcano": "A volcano erupts when magma rises; lava cools into basalt rock.",
    "river": "A river meanders across its floodplain and builds a delta at the sea.",
    "glacier": "A glacier of ice carves a valley and leaves moraines of rock behind.",
    "desert": "Dunes of sand move with the wind across the dry desert.",
    "ocean": "Ocean currents carry warm water from the equator toward the poles.",
    "forest": "Rain forests hold most of the species that live on land.",
    "soil": "Soil forms as rock weathers and organic matter decays.",
    "storm": "A storm draws energy from warm ocean water and turns into a hurricane.",
}
QUERIES = ["how does lava turn into rock", "warm water ocean", "valley carved by ice", "sand"]


class Forwarding:
    """Overrides the whole-chunk searches and forwards everything else: the
    Retriever must use the overrides, not forwarded candidate calls."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.searches = 0

    def vector_search(self, query: Vectors, k: int, filters: Filters | None = None) -> list[Hit]:
        self.searches += 1
        return self.inner.vector_search(query, k, filters)

    def keyword_search(
        self, query: str, k: int, filters: Filters | None = None, boosts: FieldBoosts | None = None
    ) -> list[Hit]:
        self.searches += 1
        return self.inner.keyword_search(query, k, filters, boosts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, make_chunk: Callable[..., Chunk]
) -> LanceStore:
    s = LanceStore(tmp_path_factory.mktemp("cand") / "lance", dimension=embedder.dimension)
    writes = []
    for i, (doc_id, text) in enumerate(TEXTS.items()):
        chapter = "fire" if doc_id in {"volcano", "soil"} else "water"
        chunk = make_chunk(doc_id, text=text, doc_id=doc_id, title=doc_id.title(), chapter=chapter)
        record = DocumentRecord(
            doc_id=doc_id,
            tenant="default",
            source=chunk.source,
            file_hash=f"h{i}",
            chunk_count=1,
            token_count=chunk.token_count,
            chapter=chapter,
            title=chunk.title,
            format="markdown",
            ingested_at="2024-01-01T00:00:00Z",
        )
        writes.append(DocumentWrite(record, [chunk], embedder.embed_documents([chunk.embed_text])))
    s.replace_documents(writes)
    s.optimize()
    return s


def settings(**kw: Any) -> Settings:
    return Settings(_env_file=None, **kw)  # type: ignore[call-arg]


def summary(hits: Sequence[Hit]) -> list[tuple[Any, ...]]:
    return [(h.chunk, h.rank, round(h.score, 6), h.vector_score, h.keyword_score) for h in hits]


def test_only_classes_that_implement_candidates_qualify(store: LanceStore) -> None:
    assert as_candidate_store(store) is store
    assert isinstance(store, CandidateStore)
    assert as_candidate_store(Forwarding(store)) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"hybrid_merge_method": "weighted"},
        {"hybrid_merge_method": "rrf_rerank"},
        {"relevance_threshold": 0.2},
        {"candidates": 3},
    ],
)
def test_candidate_path_returns_what_whole_chunk_searches_return(
    store: LanceStore, embedder: Embedder, overrides: dict[str, Any]
) -> None:
    s = settings(**overrides)
    fast = Retriever(store, embedder, s)
    wrapped = Forwarding(store)
    slow = Retriever(wrapped, embedder, s)  # type: ignore[arg-type]
    for mode in ("bm25", "vector", "hybrid"):
        for q in QUERIES:
            a = fast.search(q, mode=mode, top_k=3)  # type: ignore[arg-type]
            b = slow.search(q, mode=mode, top_k=3)  # type: ignore[arg-type]
            assert summary(a.hits) == summary(b.hits), (mode, q)
            assert all(h.chunk.text == TEXTS[h.chunk.id] for h in a.hits)
    assert wrapped.searches > 0  # the wrapper's overrides served the slow path


def test_candidates_match_searches_under_a_filter(store: LanceStore, embedder: Embedder) -> None:
    qv = embedder.embed_query("rock")
    flt: Filters = {"chapter": "fire"}
    full = store.vector_search(qv, 5, flt)
    assert store.vector_candidates(qv, 5, flt) == [(h.chunk.id, h.vector_score) for h in full]
    assert {h.chunk.id for h in full} == {"volcano", "soil"}
    kw = store.keyword_search("rock water", 5, None, FieldBoosts())
    assert store.keyword_candidates("rock water", 5, None, FieldBoosts()) == [
        (h.chunk.id, h.keyword_score) for h in kw
    ]
    assert store.keyword_candidates("rock", 0) == [] and store.vector_candidates(qv, 0) == []
    assert store.keyword_candidates("?!", 5) == []


def test_hybrid_candidates_are_both_searches_at_once(store: LanceStore, embedder: Embedder) -> None:
    for q in QUERIES:
        qv = embedder.embed_query(q)
        for flt in (None, {"chapter": "water"}):
            vec, kw, ms = store.hybrid_candidates(qv, q, 5, flt, FieldBoosts())  # type: ignore[arg-type]
            assert vec == store.vector_candidates(qv, 5, flt)  # type: ignore[arg-type]
            assert kw == store.keyword_candidates(q, 5, flt, FieldBoosts())  # type: ignore[arg-type]
            assert vec and set(ms) == {"vector", "keyword"} and ms["vector"] > 0
    assert store.hybrid_candidates(embedder.embed_query("x"), "?!", 5)[1] == []
    assert store.hybrid_candidates(embedder.embed_query("x"), "rock", 0)[:2] == ([], [])


def test_chunks_for_returns_stored_chunks_and_skips_unknown_ids(store: LanceStore) -> None:
    got = store.chunks_for(["river", "nope", "river", "storm"])
    assert set(got) == {"river", "storm"}
    assert got["river"] == store.keyword_search("meanders", 1)[0].chunk
    assert store.chunks_for([]) == {}


def test_chunks_with_vectors_reads_the_stored_vectors(store: LanceStore) -> None:
    got = store.chunks_with_vectors(["storm", "nope", "river"])
    assert set(got) == {"storm", "river"}
    want = store.vectors_for(["storm", "river"])
    for cid, (chunk, vec) in got.items():
        assert chunk == store.chunks_for([cid])[cid]
        assert vec.tolist() == want[cid].tolist()
    assert store.chunks_with_vectors([]) == {}


class ThreeCalls:
    """A CandidateStore with only the three required calls (no chunks_with_vectors)."""

    def __init__(self, inner: LanceStore) -> None:
        self.inner = inner

    def vector_candidates(self, *a: Any) -> list[tuple[str, float]]:
        return self.inner.vector_candidates(*a)

    def keyword_candidates(self, *a: Any) -> list[tuple[str, float]]:
        return self.inner.keyword_candidates(*a)

    def chunks_for(self, ids: Sequence[str]) -> dict[str, Chunk]:
        return self.inner.chunks_for(ids)

    def __getattr__(self, name: str) -> Any:
        if name == "chunks_with_vectors":
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_a_candidate_store_without_chunks_with_vectors_gets_the_same_cosines(
    store: LanceStore, embedder: Embedder
) -> None:
    three = ThreeCalls(store)
    assert as_candidate_store(three) is three  # type: ignore[arg-type]
    s = settings(candidates=2)  # so keyword-only hits reach the top 3 and need a cosine
    full = Retriever(store, embedder, s)
    plain = Retriever(three, embedder, s)  # type: ignore[arg-type]
    keyword_only = 0
    for q in QUERIES:
        a = full.search(q, mode="hybrid", top_k=3)
        b = plain.search(q, mode="hybrid", top_k=3)
        assert summary(a.hits) == summary(b.hits), q
        assert all(h.vector_score is not None for h in b.hits)
        vector_ids = {i for i, _ in store.vector_candidates(embedder.embed_query(q), 2)}
        keyword_only += sum(h.chunk.id not in vector_ids for h in b.hits)
    assert keyword_only > 0


def test_load_chunks_drops_hits_deleted_since_the_search(
    tmp_path: Path, embedder: Embedder, make_chunk: Callable[..., Chunk]
) -> None:
    s = LanceStore(tmp_path / "lance", dimension=embedder.dimension)
    for doc_id in ("a", "b"):
        c = make_chunk(doc_id, text=f"text about {doc_id}", doc_id=doc_id)
        rec = DocumentRecord(doc_id, "default", c.source, doc_id, 1, 1, "", "", "markdown", "")
        s.replace_documents([DocumentWrite(rec, [c], embedder.embed_documents([c.text]))])
    hits = [Hit(chunk=make_chunk(i, text=""), score=1.0 - n) for n, i in enumerate("ab")]
    s.delete_document("a")
    loaded = load_chunks(hits, s)
    assert [h.chunk.id for h in loaded] == ["b"] and loaded[0].chunk.text == "text about b"
    assert loaded[0].score == 0.0 and loaded[0].vector_score is None

    # with the query vector, a hit without a cosine gets it from the same read
    qv = embedder.embed_query("text about b")
    with_cos = load_chunks(hits, s, qv)
    assert [h.chunk.id for h in with_cos] == ["b"]
    stored = s.vectors_for(["b"])["b"]
    assert with_cos[0].vector_score == pytest.approx(float(stored @ qv.reshape(-1)), abs=1e-6)
    assert (with_cos[0].vector_score or 0.0) > 0.5
    kept = load_chunks([Hit(chunk=make_chunk("b", text=""), score=1.0, vector_score=0.25)], s, qv)
    assert kept[0].vector_score == 0.25  # a cosine the search gave is kept
    s.close()
