"""The Retriever end to end: the real LanceStore and the real ONNX MiniLM model.

The corpus is crafted so that each single mode fails one query: an error code that
only exact term matching tells apart from its look-alikes (vector search ranks the
look-alikes first), and a paraphrase that shares no word with its answer (BM25
finds nothing). Hybrid search must get both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragline.embed.base import Embedder, Vectors
from ragline.embed.onnx import OnnxEmbedder
from ragline.engine import Ragline
from ragline.retrieve.rerank import HeuristicReranker
from ragline.retrieve.retriever import TIMING_KEYS, Retriever
from ragline.settings import Settings
from ragline.store.base import CandidateQuery, Candidates, DocumentWrite, Store
from ragline.store.lance import LanceStore
from ragline.store.reads import vector_search, vectors_for
from ragline.types import Chunk, DocumentRecord, Filters, Hit

ChunkFactory = Callable[..., Chunk]

ERRORS = {
    "quota": "Error code E4711 means the project quota is exhausted.",
    "network": "Error code E4712 means the network cannot be reached.",
    "password": "Error code E4171 means the password has expired.",
    "disk": "Error code E7411 means the disk is full.",
    "licence": "Error code E1147 means the licence is invalid.",
}
ML = {
    "dropout": "Dropout zeroes a fraction of the activations in each step, "
    "which keeps the network from fitting noise.",
    "overfit": "A neural net trained too long memorises its training set and generalises poorly.",
    "sgd": "Stochastic gradient descent updates the parameters with the gradient of a minibatch.",
    "gpu": "GPUs run thousands of threads in parallel, which makes matrix multiplication fast.",
}
MISC = {"bread": "Knead the dough for ten minutes, then let it rise in a warm place for an hour."}
#: One document in several chunks, for neighbour expansion.
GUIDE = [
    "Warm-up raises the learning rate linearly over the first thousand steps.",
    "Cosine decay then lowers the learning rate smoothly towards zero.",
    "Restarts jump the learning rate back up to escape sharp minima.",
    "A final constant phase at a tiny learning rate polishes the weights.",
]

LEXICAL = ("E4711", "quota")  # vector search ranks E4712/E1147 first
SEMANTIC = ("regularizer that silences hidden neurons", "dropout")  # no shared word


class RecordingStore:
    """A real store that also notes each search call (to see what reaches it)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls: list[tuple[str, Any]] = []

    def candidates(self, query: CandidateQuery) -> Candidates:
        side = "weighted" if query.weights else "hybrid" if query.vector is not None else "one"
        self.calls.append(
            (f"{side}_candidates", (query.text, query.k, query.filters, query.boosts))
        )
        return self.inner.candidates(query)

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        self.calls.append(("chunks_with_vectors", list(ids)))
        return self.inner.chunks_with_vectors(ids)

    def vectors_for(self, ids: Sequence[str]) -> dict[str, Vectors]:
        self.calls.append(("vectors_for", list(ids)))
        return vectors_for(self.inner, ids)

    def chunks_by_index(self, doc_id: str, indices: Sequence[int]) -> list[Chunk]:
        self.calls.append(("chunks_by_index", (doc_id, list(indices))))
        return self.inner.chunks_by_index(doc_id, indices)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def called(self, name: str) -> list[Any]:
        return [args for n, args in self.calls if n == name]


class CountingEmbedder:
    """The real embedder, counting query embeddings."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.queries: list[str] = []

    def embed_query(self, text: str) -> Vectors:
        self.queries.append(text)
        return self.inner.embed_query(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ReversingReranker:
    """Records its calls and reverses the order it is given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], int]] = []

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        self.calls.append((query, [h.chunk.id for h in hits], top_k))
        out = list(reversed(hits))[:top_k]
        return [
            Hit(chunk=h.chunk, score=-i, rank=i, vector_score=h.vector_score, rerank_score=-i)
            for i, h in enumerate(out, start=1)
        ]


@pytest.fixture(scope="module")
def minilm() -> OnnxEmbedder:
    return OnnxEmbedder()


def _write(
    store: Store,
    embedder: Embedder,
    make_chunk: ChunkFactory,
    doc_id: str,
    texts: list[str],
    *,
    title: str,
    chapter: str,
    tenant: str = "default",
) -> None:
    chunks = [
        make_chunk(
            f"{doc_id}#{i}" if len(texts) > 1 else doc_id,
            text=text,
            doc_id=doc_id,
            chunk_index=i,
            token_count=embedder.count_tokens(text),
            title=title,
            section=title,
            heading_path=(title,),
            chapter=chapter,
            tenant=tenant,
        )
        for i, text in enumerate(texts)
    ]
    record = DocumentRecord(
        doc_id=doc_id,
        tenant=tenant,
        source=chunks[0].source,
        file_hash=f"file-{doc_id}",
        chunk_count=len(chunks),
        token_count=sum(c.token_count for c in chunks),
        chapter=chapter,
        title=title,
        format="markdown",
        ingested_at="2024-01-01T00:00:00Z",
    )
    vectors = embedder.embed_documents([c.embed_text for c in chunks])
    store.replace_documents([DocumentWrite(record=record, chunks=chunks, vectors=vectors)])


@pytest.fixture(scope="module")
def lance(
    tmp_path_factory: pytest.TempPathFactory, minilm: OnnxEmbedder, make_chunk: ChunkFactory
) -> Store:
    store = LanceStore(tmp_path_factory.mktemp("index") / "lance", dimension=minilm.dimension)
    for docs, title, chapter in (
        (ERRORS, "Error codes", "errors"),
        (ML, "Deep learning", "ml"),
        (MISC, "Kitchen", "misc"),
    ):
        for doc_id, text in docs.items():
            _write(store, minilm, make_chunk, doc_id, [text], title=title, chapter=chapter)
    _write(store, minilm, make_chunk, "guide", GUIDE, title="Schedules", chapter="ml")
    _write(
        store,
        minilm,
        make_chunk,
        "acme-quota",
        [ERRORS["quota"]],
        title="Error codes",
        chapter="errors",
        tenant="acme",
    )
    store.optimize()
    return store


def settings(**kw: Any) -> Settings:
    return Settings(_env_file=None, **kw)  # type: ignore[call-arg]


def ids(hits: list[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


# --- quality: hybrid gets what either mode alone misses ---------------------------------


@pytest.mark.parametrize("method", ["rrf", "weighted", "rrf_rerank"])
def test_hybrid_at_least_as_good_as_each_mode(
    lance: Store, minilm: OnnxEmbedder, method: str
) -> None:
    retriever = Retriever(lance, minilm, settings(hybrid_merge_method=method))

    def recall_at_2(mode: str) -> float:
        found = [
            target in ids(retriever.search(q, mode=mode, top_k=2).hits)  # type: ignore[arg-type]
            for q, target in (LEXICAL, SEMANTIC)
        ]
        return sum(found) / len(found)

    bm25, vector, hybrid = recall_at_2("bm25"), recall_at_2("vector"), recall_at_2("hybrid")
    # The crafted failures hold: each single mode misses one of the two queries.
    assert bm25 == 0.5
    assert vector == 0.5
    assert hybrid >= max(bm25, vector)
    assert hybrid == 1.0


def test_single_modes_fail_where_crafted(lance: Store, minilm: OnnxEmbedder) -> None:
    retriever = Retriever(lance, minilm, settings())
    assert ids(retriever.search(LEXICAL[0], mode="bm25", top_k=5).hits) == ["quota"]
    assert "quota" not in ids(retriever.search(LEXICAL[0], mode="vector", top_k=2).hits)
    assert retriever.search(SEMANTIC[0], mode="bm25", top_k=5).hits == []
    assert ids(retriever.search(SEMANTIC[0], mode="vector", top_k=1).hits) == ["dropout"]
    hybrid = retriever.search(LEXICAL[0], mode="hybrid", top_k=3)
    assert hybrid.hits[0].chunk.id == "quota"
    assert hybrid.hits[0].keyword_score is not None
    assert hybrid.hits[0].vector_score is not None


# --- filters and tenants --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "call_name"), [("weighted", "weighted_candidates"), ("rrf", "hybrid_candidates")]
)
def test_filters_and_tenant_reach_the_store(
    lance: Store, minilm: OnnxEmbedder, method: str, call_name: str
) -> None:
    store = RecordingStore(lance)
    s = settings(candidates=7, hybrid_merge_method=method)
    retriever = Retriever(store, minilm, s)  # type: ignore[arg-type]
    filters: Filters = {"chapter": "ml"}
    result = retriever.search("learning rate", top_k=5, filters=filters)
    expected = {"chapter": "ml", "tenant": "default"}
    (call,) = store.called(call_name)
    assert call == ("learning rate", 7, expected, settings().boosts)
    assert filters == {"chapter": "ml"}  # the caller's dict is left alone
    assert result.hits
    assert {h.chunk.chapter for h in result.hits} == {"ml"}


def test_tenants_are_isolated(lance: Store, minilm: OnnxEmbedder) -> None:
    default = Retriever(lance, minilm, settings())
    assert {h.chunk.tenant for h in default.search("E4711 quota", top_k=20).hits} == {"default"}
    other = default.search("E4711 quota", top_k=20, filters={"tenant": "acme"})
    assert ids(other.hits) == ["acme-quota"]
    acme = Retriever(lance, minilm, settings(tenant="acme"))
    assert ids(acme.search("E4711 quota", mode="bm25").hits) == ["acme-quota"]


# --- scores and thresholds --------------------------------------------------------------


def test_keyword_only_hits_get_their_cosine(lance: Store, minilm: OnnxEmbedder) -> None:
    store = RecordingStore(lance)
    retriever = Retriever(store, minilm, settings(candidates=2))  # type: ignore[arg-type]
    result = retriever.search("what does error code E4711 mean?", top_k=2)
    vector_ids = {h.chunk.id for h in vector_search(lance, minilm.embed_query(result.query), 2)}
    keyword_only = [h for h in result.hits if h.chunk.id not in vector_ids]
    assert keyword_only, "the query must produce keyword-only candidates"
    # their cosines come with their chunks: one row read, no separate vector read
    assert len(store.called("chunks_with_vectors")) == 1
    assert store.called("vectors_for") == []
    q = minilm.embed_query(result.query)
    for h in result.hits:
        assert h.vector_score is not None
        expected = float(minilm.embed_documents([h.chunk.embed_text])[0] @ q)
        assert h.vector_score == pytest.approx(expected, abs=1e-4)


def test_threshold_drops_low_similarity_hits(lance: Store, minilm: OnnxEmbedder) -> None:
    query = "learning rate schedule"
    everything = Retriever(lance, minilm, settings()).search(query, top_k=50).hits
    scores = sorted(h.vector_score for h in everything if h.vector_score is not None)
    assert len(scores) == len(everything) > 4
    cut = scores[len(scores) // 2]
    kept = Retriever(lance, minilm, settings(relevance_threshold=cut)).search(query, top_k=50)
    assert ids(kept.hits) == [h.chunk.id for h in everything if h.vector_score >= cut]  # type: ignore[operator]
    assert 0 < len(kept.hits) < len(everything)
    assert [h.rank for h in kept.hits] == list(range(1, len(kept.hits) + 1))


def test_bm25_embeds_the_query_only_for_a_threshold(lance: Store, minilm: OnnxEmbedder) -> None:
    counting = CountingEmbedder(minilm)
    plain = Retriever(lance, counting, settings()).search("learning rate", mode="bm25")  # type: ignore[arg-type]
    assert counting.queries == []
    assert plain.timings_ms["embed"] == 0.0
    assert plain.hits and all(h.vector_score is None for h in plain.hits)

    sims = {
        h.chunk.id: float(
            minilm.embed_documents([h.chunk.embed_text])[0] @ minilm.embed_query("learning rate")
        )
        for h in plain.hits
    }
    cut = sorted(sims.values())[len(sims) // 2]
    strict = Retriever(lance, counting, settings(relevance_threshold=cut))  # type: ignore[arg-type]
    result = strict.search("learning rate", mode="bm25")
    assert counting.queries == ["learning rate"]
    assert ids(result.hits) == [h.chunk.id for h in plain.hits if sims[h.chunk.id] >= cut]
    assert all(h.vector_score is not None and h.vector_score >= cut for h in result.hits)
    assert len(result.hits) < len(plain.hits)


# --- rerank, expand, timings -------------------------------------------------------------


def test_rrf_rerank_calls_the_reranker_on_the_fused_head(
    lance: Store, minilm: OnnxEmbedder
) -> None:
    query = "learning rate"
    fused = Retriever(lance, minilm, settings(hybrid_merge_method="rrf")).search(query, top_k=4)
    spy = ReversingReranker()
    s = settings(hybrid_merge_method="rrf_rerank", rerank_depth=4)
    result = Retriever(lance, minilm, s, reranker=spy).search(query, top_k=2)
    assert spy.calls == [(query, ids(fused.hits), 2)]
    assert ids(result.hits) == list(reversed(ids(fused.hits)))[:2]
    assert [h.rank for h in result.hits] == [1, 2]
    assert result.timings_ms["rerank"] > 0.0

    Retriever(lance, minilm, settings(), reranker=spy).search(query, top_k=2)
    Retriever(lance, minilm, s, reranker=spy).search(query, mode="vector", top_k=2)
    assert len(spy.calls) == 1  # plain rrf and single modes never rerank


def test_rrf_rerank_default_reranker_is_heuristic(lance: Store, minilm: OnnxEmbedder) -> None:
    retriever = Retriever(lance, minilm, settings(hybrid_merge_method="rrf_rerank"))
    assert isinstance(retriever.reranker, HeuristicReranker)
    hits = retriever.search("gradient descent minibatch", top_k=3).hits
    assert hits[0].chunk.id == "sgd"
    assert all(h.rerank_score is not None and h.rerank_score == h.score for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_expand_adds_neighbours_from_the_store(lance: Store, minilm: OnnxEmbedder) -> None:
    store = RecordingStore(lance)
    retriever = Retriever(store, minilm, settings())  # type: ignore[arg-type]
    result = retriever.search("cosine decay", mode="bm25", top_k=1, expand=1)
    assert [(h.chunk.id, h.expanded_from) for h in result.hits] == [
        ("guide#0", "guide#1"),
        ("guide#1", None),
        ("guide#2", "guide#1"),
    ]
    assert store.called("chunks_by_index") == [("guide", [0, 2])]
    assert result.timings_ms["expand"] > 0.0
    assert len(retriever.search("cosine decay", mode="bm25", top_k=1).hits) == 1


def test_timings_cover_every_stage(lance: Store, minilm: OnnxEmbedder) -> None:
    result = Retriever(lance, minilm, settings()).search("gradient descent", expand=1)
    t = result.timings_ms
    assert tuple(t) == TIMING_KEYS
    assert all(math.isfinite(v) and v >= 0.0 for v in t.values())
    for stage in ("embed", "vector", "keyword", "fusion", "expand"):
        assert t[stage] > 0.0, stage
    # LanceDB runs a hybrid search's vector and keyword queries concurrently: each
    # stage holds its own query's time, and only the longer of the two adds up.
    serial = sum(v for k, v in t.items() if k not in {"total", "vector", "keyword"})
    assert t["total"] >= serial + max(t["vector"], t["keyword"]) - 1e-9
    assert t["total"] < serial + t["vector"] + t["keyword"] + 50.0
    assert result.to_dict()["timings_ms"].keys() == set(TIMING_KEYS)


# --- defaults and validation ------------------------------------------------------------------


def test_defaults_follow_settings(lance: Store, minilm: OnnxEmbedder) -> None:
    assert Retriever(lance, minilm, settings()).search("dropout").mode == "hybrid"
    vector_only = Retriever(lance, minilm, settings(hybrid_search_enabled=False))
    assert vector_only.search("dropout").mode == "vector"
    few = Retriever(lance, minilm, settings(retrieval_top_k=3, candidates=2))
    assert len(few.search("error code").hits) == 3  # depth grows to top_k
    assert len(few.search("error code", top_k=6).hits) == 6


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "query must be a non-empty string"),
        ({"query": "  \n\t"}, "query must be a non-empty string"),
        ({"query": "x", "top_k": 0}, "top_k must be an integer from 1 to 1000"),
        ({"query": "x", "top_k": 1001}, "top_k must be an integer from 1 to 1000"),
        ({"query": "x", "top_k": True}, "top_k must be an integer"),
        ({"query": "x", "mode": "fuzzy"}, "mode must be one of bm25, vector, hybrid"),
        ({"query": "x", "expand": -1}, "expand must be an integer from 0 to 10"),
        ({"query": "x", "expand": 11}, "expand must be an integer from 0 to 10"),
    ],
)
def test_rejects_bad_input(
    lance: Store, minilm: OnnxEmbedder, kwargs: dict[str, Any], message: str
) -> None:
    retriever = Retriever(lance, minilm, settings())
    query = kwargs.pop("query")
    with pytest.raises(ValueError, match=message):
        retriever.search(query, **kwargs)


def test_section_expansion_follows_settings_and_an_explicit_zero_turns_it_off(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    docs = tmp_path / "sec"
    docs.mkdir()
    body = " ".join(f"Sentence {i} about momentum in optimisation." for i in range(60))
    other = " ".join(f"Line {i} on unrelated gardening topics." for i in range(60))
    (docs / "a.md").write_text(f"# Notes\n\n## Momentum\n\n{body}\n\n## Garden\n\n{other}\n")
    rag = make_rag(expand_section=True, chunk_max_tokens=64, chunk_min_tokens=8)
    rag.ingest(docs)
    hits = rag.search("Sentence 3 about momentum", top_k=1).hits
    primary = [h for h in hits if h.expanded_from is None]
    added = [h for h in hits if h.expanded_from is not None]
    assert len(primary) == 1 and added
    assert {h.chunk.section for h in added} == {primary[0].chunk.section}
    bare = rag.search("Sentence 3 about momentum", top_k=1, expand=0).hits
    assert [h.chunk.id for h in bare] == [primary[0].chunk.id]
