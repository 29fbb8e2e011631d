"""Ranking by id, then rows for the hits (LanceStore): the same results as whole-chunk
searches fused as hits, with chunks loaded only for the hits returned."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ragline.embed.base import Embedder
from ragline.fusion import reciprocal_rank_fusion, weighted_fusion, weighted_pairs
from ragline.retrieve.retriever import Retriever, to_hits
from ragline.settings import Settings
from ragline.store.base import (
    CandidateQuery,
    DocumentWrite,
    Store,
    candidates_in_turn,
)
from ragline.store.lance import LanceStore
from ragline.store.reads import (
    keyword_candidates,
    keyword_search,
    vector_candidates,
    vector_search,
    vectors_for,
)
from ragline.types import Chunk, DocumentRecord, FieldBoosts, Filters, Fused, Hit

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


def reference(
    store: Store, embedder: Embedder, s: Settings, q: str, mode: str, top_k: int
) -> list[Hit]:
    """What a search must return, from whole-chunk searches and the Hit-list fusions:
    every candidate's cosine filled in, thresholded, cut (no reranker)."""
    qv = embedder.embed_query(q)
    depth, scope = max(s.candidates, top_k), {"tenant": s.tenant}
    vec = vector_search(store, qv, depth, scope) if mode != "bm25" else []
    kw = keyword_search(store, q, depth, scope, s.boosts) if mode != "vector" else []
    if mode == "hybrid" and s.hybrid_merge_method == "weighted":
        hits = weighted_fusion(vec, kw, s.hybrid_vector_weight, s.hybrid_keyword_weight)
    elif mode == "hybrid":
        hits = reciprocal_rank_fusion([vec, kw], k=s.rrf_k)
    else:
        hits = vec or kw
    if mode == "hybrid" or s.relevance_threshold > 0:
        stored = vectors_for(store, [h.chunk.id for h in hits])
        hits = [
            h
            if h.vector_score is not None
            else replace(h, vector_score=float(stored[h.chunk.id] @ qv))
            for h in hits
        ]
    if s.relevance_threshold > 0:
        hits = [h for h in hits if (h.vector_score or 0.0) >= s.relevance_threshold]
    return [replace(h, rank=i) for i, h in enumerate(hits[:top_k], start=1)]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"hybrid_merge_method": "rrf"},
        {"relevance_threshold": 0.2},
        {"candidates": 3},
    ],
)
def test_the_search_path_returns_what_whole_chunk_searches_return(
    store: LanceStore, embedder: Embedder, overrides: dict[str, Any]
) -> None:
    s = settings(**overrides)
    retriever = Retriever(store, embedder, s)
    for mode in ("bm25", "vector", "hybrid"):
        for q in QUERIES:
            got = retriever.search(q, mode=mode, top_k=3)  # type: ignore[arg-type]
            want = reference(store, embedder, s, q, mode, 3)
            assert summary(got.hits) == summary(want), (mode, q)
            assert all(h.chunk.text == TEXTS[h.chunk.id] for h in got.hits)


def test_candidates_match_searches_under_a_filter(store: LanceStore, embedder: Embedder) -> None:
    qv = embedder.embed_query("rock")
    flt: Filters = {"chapter": "fire"}
    full = vector_search(store, qv, 5, flt)
    assert vector_candidates(store, qv, 5, flt) == [(h.chunk.id, h.vector_score) for h in full]
    assert {h.chunk.id for h in full} == {"volcano", "soil"}
    kw = keyword_search(store, "rock water", 5, None, FieldBoosts())
    assert keyword_candidates(store, "rock water", 5, None, FieldBoosts()) == [
        (h.chunk.id, h.keyword_score) for h in kw
    ]
    assert keyword_candidates(store, "rock", 0) == [] and vector_candidates(store, qv, 0) == []
    assert keyword_candidates(store, "?!", 5) == []


def test_hybrid_candidates_are_both_searches_at_once(store: LanceStore, embedder: Embedder) -> None:
    for q in QUERIES:
        qv = embedder.embed_query(q)
        for flt in (None, {"chapter": "water"}):
            found = store.candidates(CandidateQuery(5, qv, q, flt, FieldBoosts()))  # type: ignore[arg-type]
            vec, kw, ms = found.vector, found.keyword, found.ms
            assert found.fused is None
            assert vec == vector_candidates(store, qv, 5, flt)  # type: ignore[arg-type]
            assert kw == keyword_candidates(store, q, 5, flt, FieldBoosts())  # type: ignore[arg-type]
            assert vec and set(ms) == {"vector", "keyword"} and ms["vector"] > 0
    assert store.candidates(CandidateQuery(5, embedder.embed_query("x"), "?!")).keyword == []
    none = store.candidates(CandidateQuery(0, embedder.embed_query("x"), "rock"))
    assert (none.vector, none.keyword) == ([], [])


@pytest.mark.parametrize("limit", [None, 1, 3])
def test_weighted_candidates_fuse_on_positions_like_the_pairs(
    store: LanceStore, embedder: Embedder, limit: int | None
) -> None:
    """The mirror's fusion on row positions equals the default path (both candidate
    lists fused by id) entry for entry, under filters and with empty lists too."""
    w = (0.3, 0.7)
    for q in [*QUERIES, "?!"]:
        qv = embedder.embed_query(q)
        for flt in (None, {"chapter": "water"}, {"chapter": "nowhere"}):
            ask = CandidateQuery(5, qv, q, flt, FieldBoosts(), w, limit)  # type: ignore[arg-type]
            found = store.candidates(ask)
            got, ms = found.fused, found.ms
            both = store.candidates(replace(ask, weights=None))
            assert got == weighted_pairs(both.vector, both.keyword, *w, limit=limit)
            in_turn = candidates_in_turn(
                lambda c: vector_candidates(store, c.vector, c.k, c.filters),
                lambda c: keyword_candidates(store, c.text, c.k, c.filters, c.boosts),
                ask,
            )
            assert got == in_turn.fused
            assert set(ms) == {"vector", "keyword", "fusion"}
            if flt is None:
                assert got and ms["vector"] > 0


def test_chunks_with_vectors_reads_the_stored_vectors(store: LanceStore) -> None:
    got = store.chunks_with_vectors(["storm", "nope", "river"])
    assert set(got) == {"storm", "river"}
    want = vectors_for(store, ["storm", "river"])
    for cid, (chunk, vec) in got.items():
        assert chunk == vector_search(store, vec, 1)[0].chunk
        assert vec.tolist() == want[cid].tolist()
    assert store.chunks_with_vectors([]) == {}


def test_to_hits_drops_candidates_deleted_since_the_search(
    tmp_path: Path, embedder: Embedder, make_chunk: Callable[..., Chunk]
) -> None:
    s = LanceStore(tmp_path / "lance", dimension=embedder.dimension)
    for doc_id in ("a", "b"):
        c = make_chunk(doc_id, text=f"text about {doc_id}", doc_id=doc_id)
        rec = DocumentRecord(doc_id, "default", c.source, doc_id, 1, 1, "", "", "markdown", "")
        s.replace_documents([DocumentWrite(rec, [c], embedder.embed_documents([c.text]))])
    ranked = [Fused(i, 1.0 - n, n + 1, None, 2.0) for n, i in enumerate("ab")]
    s.delete_document("a")
    loaded = to_hits(ranked, s, None)
    assert [h.chunk.id for h in loaded] == ["b"] and loaded[0].chunk.text == "text about b"
    assert loaded[0].score == 0.0 and loaded[0].vector_score is None

    # with the query vector, a hit without a cosine gets it from the same read
    qv = embedder.embed_query("text about b")
    with_cos = to_hits(ranked, s, qv)
    assert [h.chunk.id for h in with_cos] == ["b"]
    stored = vectors_for(s, ["b"])["b"]
    assert with_cos[0].vector_score == pytest.approx(float(stored @ qv.reshape(-1)), abs=1e-6)
    assert (with_cos[0].vector_score or 0.0) > 0.5
    kept = to_hits([Fused("b", 1.0, 1, 0.25, None)], s, qv)
    assert kept[0].vector_score == 0.25  # a cosine the search gave is kept
    s.close()
