"""The store contract: every store (tests/store/contract.py) passes these tests unchanged.

Upserts, deletes, incremental sync through the real Indexer, filters, tenants,
BM25 scores against a reference computed here, vector recall against exact
numpy search, the model fingerprint, and a writer killed with SIGKILL mid-write.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ragline.embed.base import Embedder, ModelFingerprint
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import make_chunker
from ragline.ingest.sync import Indexer
from ragline.settings import Settings
from ragline.store.base import (
    DocumentWrite,
    IndexStore,
    Store,
    StoreAbilities,
    StoreError,
    StoreInfo,
)
from ragline.store.reads import document_vectors, keyword_search, vector_search, vectors_for
from ragline.text.bm25 import tokenize
from ragline.text.language import detect_language
from ragline.types import FieldBoosts


def _load_contract() -> ModuleType:
    """tests/ has no packages (importlib import mode): load contract.py by path, once."""
    name = "ragline_store_contract"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, CONTRACT_PY)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CONTRACT_PY = Path(__file__).with_name("contract.py")
_contract = _load_contract()
STORE_BACKENDS = _contract.STORE_BACKENDS
BACKEND_FIXTURES = _contract.BACKEND_FIXTURES
ContractEnv = _contract.ContractEnv
DIM = _contract.DIM
PASSAGES = _contract.PASSAGES
unit = _contract.unit
make_chunk = _contract.make_chunk
record_for = _contract.record_for
write = _contract.write
ids = _contract.ids
all_chunks = _contract.all_chunks

FP = ModelFingerprint(name="contract-model", dimension=DIM, digest="c" * 64)


@pytest.fixture(params=sorted(STORE_BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def env(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> ContractEnv:
    name = "c_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:40]
    name += f"_{os.getpid()}_{time.monotonic_ns() % 10**6}"
    options = {
        opt: str(request.getfixturevalue(fixture))
        for opt, fixture in BACKEND_FIXTURES.get(backend, {}).items()
    }
    return ContractEnv(tmp_path / backend, DIM, name, options)


@pytest.fixture
def open_store(backend: str, env: ContractEnv) -> Iterator[Callable[[], Store]]:
    """Open (or re-open) the test's store; every store opened is closed at the end."""
    opened: list[Store] = []

    def opener() -> Store:
        s = STORE_BACKENDS[backend](env)
        opened.append(s)
        return s

    yield opener
    for s in opened:
        s.close()


@pytest.fixture
def store(backend: str, env: ContractEnv) -> Iterator[Store]:
    s = STORE_BACKENDS[backend](env)
    yield s
    s.close()


# ------------------------------------------------------------- upsert/delete


def test_is_a_store_and_starts_empty(store: Store) -> None:
    assert isinstance(store, IndexStore)  # both protocols: search/sync and maintenance
    assert isinstance(store.abilities, StoreAbilities)  # declared once, when opened
    assert store.info() == StoreInfo(chunks=0, dimension=DIM)
    assert store.documents() == []
    assert store.fingerprint() is None
    assert keyword_search(store, "gradient", 5) == []
    assert vector_search(store, unit(np.random.default_rng(0), 1)[0], 5) == []


def test_every_chunk_field_round_trips(store: Store) -> None:
    c = make_chunk(
        "doc",
        0,
        "Ünïcödé text with 'quotes' and a formula $x^2$.",
        heading_path=("Title", "Part 'A'", "Sub"),
        has_code=True,
        has_equations=True,
        page=7,
        metadata={"authors": ["a", "b"], "year": 2024, "draft": False},
    )
    vec = unit(np.random.default_rng(1), 1)
    store.replace_documents([DocumentWrite(record_for("doc", [c]), [c], vec)])
    (back,) = all_chunks(store)
    assert back == c
    assert store.documents() == [record_for("doc", [c])]
    assert store.chunks_by_index("doc", [0, 5]) == [c]
    np.testing.assert_allclose(vectors_for(store, [c.id])[c.id], vec[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        document_vectors(store, "doc")[c.content_hash], vec[0], rtol=1e-6, atol=1e-6
    )


def test_replacing_a_document_leaves_only_its_new_chunks(store: Store) -> None:
    write(store, "a", PASSAGES[:4], seed=1)
    write(store, "b", PASSAGES[4:], seed=2)
    new, vecs = write(
        store, "a", ["Gradient clipping bounds the update norm.", PASSAGES[1]], seed=3
    )
    got = sorted(all_chunks(store), key=lambda c: c.id)
    assert [c.id for c in got] == ["acme/a/0", "acme/a/1", "acme/b/0", "acme/b/1"]
    assert [c.text for c in got if c.doc_id == "a"] == [c.text for c in new]
    assert store.info().chunks == 4
    assert store.info({"doc_id": "a"}).chunks == 2
    hits = keyword_search(store, "gradient", 10)
    assert ids(hits) == ["acme/a/0"]  # the old passage about gradient descent is gone
    hits = vector_search(store, vecs[0], 1)
    assert ids(hits) == ["acme/a/0"]
    assert hits[0].vector_score == pytest.approx(1.0, abs=1e-5)
    assert [r.chunk_count for r in store.documents()] == [2, 2]
    assert [c.chunk_index for c in store.chunks_by_index("a", [0, 1, 2])] == [0, 1]
    assert store.chunks_by_index("a") == sorted(new, key=lambda c: c.chunk_index)
    assert store.chunks_by_index("a", []) == [] and store.chunks_by_index("nope") == []


def test_batch_replace_of_several_documents(store: Store) -> None:
    items = []
    for d in range(3):
        chunks = [make_chunk(f"d{d}", i, f"{PASSAGES[(d + i) % 6]}") for i in range(d + 1)]
        items.append(
            DocumentWrite(
                record_for(f"d{d}", chunks), chunks, unit(np.random.default_rng(d), d + 1)
            )
        )
    store.replace_documents(items)
    assert Counter(c.doc_id for c in all_chunks(store)) == {"d0": 1, "d1": 2, "d2": 3}
    assert {r.doc_id for r in store.documents()} == {"d0", "d1", "d2"}
    empty = DocumentWrite(record_for("d2", []), [], np.zeros((0, DIM), np.float32))
    store.replace_documents([empty])
    assert store.info({"doc_id": "d2"}).chunks == 0


def test_bad_writes_raise_and_change_nothing(store: Store) -> None:
    write(store, "a", PASSAGES[:2], seed=1)
    before = sorted(c.id for c in all_chunks(store))
    c = make_chunk("b", 0, "text")
    for bad in (
        DocumentWrite(record_for("b", [c]), [c], np.ones((1, DIM + 1), np.float32)),
        DocumentWrite(record_for("b", [c]), [c], np.full((1, DIM), np.nan, np.float32)),
        DocumentWrite(record_for("b", [c]), [c], np.ones((2, DIM), np.float32)),
        DocumentWrite(record_for("b", [c]), [c, c], np.ones((2, DIM), np.float32)),
    ):
        with pytest.raises(StoreError):
            store.replace_documents([bad])
    assert sorted(c.id for c in all_chunks(store)) == before
    assert [r.doc_id for r in store.documents()] == ["a"]


def test_delete_removes_chunks_from_both_searches_and_the_record(store: Store) -> None:
    _, vecs = write(store, "a", PASSAGES[:3], seed=1)
    write(store, "b", PASSAGES[3:], seed=2)
    store.optimize()
    store.delete_document("a")
    assert store.info().chunks == 3
    assert [r.doc_id for r in store.documents()] == ["b"]
    assert "acme/a/0" not in ids(vector_search(store, vecs[0], 10))
    assert keyword_search(store, "gradient convolutional attention", 10) == []
    assert vectors_for(store, ["acme/a/0"]) == {}
    assert document_vectors(store, "a") == {}
    store.optimize()
    assert keyword_search(store, "gradient", 10) == []
    store.delete_document("never-there")  # deleting an unknown document is a no-op


# -------------------------------------------------------------- incremental sync


def test_incremental_sync_through_the_indexer(
    store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    root = tmp_path / "docs"
    (root / "ch1").mkdir(parents=True)
    (root / "ch2").mkdir()
    (root / "ch1" / "a.md").write_text("# Alpha\n\nGradient descent moves downhill.\n")
    (root / "ch1" / "b.md").write_text("# Beta\n\nConvolutions share weights.\n")
    (root / "ch2" / "c.md").write_text("# Gamma\n\nAttention weighs tokens.\n")
    settings = Settings(index_dir=tmp_path / "unused")
    indexer = Indexer(store, embedder, settings, make_chunker(settings, TokenCounter()))

    first = indexer.sync(root)
    assert first.ok and sorted(first.indexed) == ["ch1/a.md", "ch1/b.md", "ch2/c.md"]
    assert store.fingerprint() == embedder.fingerprint
    total = store.info().chunks
    assert total == first.index_chunks >= 3

    again = indexer.sync(root)
    assert again.indexed == [] and sorted(again.skipped) == ["ch1/a.md", "ch1/b.md", "ch2/c.md"]
    assert store.info().chunks == total

    (root / "ch1" / "a.md").write_text("# Alpha\n\nMomentum accelerates stochastic descent.\n")
    (root / "ch2" / "c.md").unlink()
    third = indexer.sync(root)
    assert third.indexed == ["ch1/a.md"] and third.deleted == ["ch2/c.md"]
    texts = " ".join(c.text for c in all_chunks(store))
    assert "Momentum" in texts and "downhill" not in texts and "Attention" not in texts
    assert sorted(r.source.rsplit("/", 1)[-1] for r in store.documents()) == ["a.md", "b.md"]
    assert ids(keyword_search(store, "downhill attention", 5)) == []
    assert [h.chunk.source.rsplit("/", 1)[-1] for h in keyword_search(store, "momentum", 5)] == [
        "a.md"
    ]
    assert len({c.id for c in all_chunks(store)}) == store.info().chunks
    assert store.info({"chapter": "ch1"}).chunks == store.info().chunks


# ---------------------------------------------------------------- filters/tenants


def test_filters_push_down_in_both_searches(store: Store) -> None:
    rng = np.random.default_rng(5)
    write(store, "code", PASSAGES[:3], unit(rng, 3), chapter="ch1", has_code=True, page=1)
    write(store, "maths", PASSAGES[3:], unit(rng, 3), chapter="ch2", has_equations=True, page=2)
    write(store, "other", PASSAGES, unit(rng, 6), tenant="zeta", chapter="ch1")
    q = unit(rng, 1)[0]
    cases: list[tuple[dict[str, str | int | bool], set[str]]] = [
        ({"chapter": "ch1"}, {"code", "other"}),
        ({"has_code": True}, {"code"}),
        ({"has_equations": True, "tenant": "acme"}, {"maths"}),
        ({"page": 2}, {"maths"}),
        ({"section": "Basics", "tenant": "zeta"}, {"other"}),
        ({"doc_id": "maths", "chapter": "ch1"}, set()),
    ]
    for filters, docs in cases:
        expected = sum({"code": 3, "maths": 3, "other": 6}[d] for d in docs)
        assert store.info(filters).chunks == expected, filters
        vhits = vector_search(store, q, 20, filters)
        assert {h.chunk.doc_id for h in vhits} == docs, filters
        assert len(vhits) == expected  # a pre-filter: top-k stays full under a filter
        khits = keyword_search(
            store, "activations gradient attention networks weights", 20, filters
        )
        assert {h.chunk.doc_id for h in khits} <= docs, filters
        assert all(h.keyword_score and h.keyword_score > 0 for h in khits)
    with pytest.raises((StoreError, ValueError)):
        vector_search(store, q, 5, {"no such field": "x"})
    with pytest.raises((StoreError, ValueError)):
        keyword_search(store, "gradient", 5, {"has_code": "yes"})


def test_tenants_are_isolated(store: Store) -> None:
    rng = np.random.default_rng(7)
    same = unit(rng, 2)
    write(store, "doc", PASSAGES[:2], same, tenant="acme")
    write(store, "doc2", PASSAGES[:2], same, tenant="zeta")
    for tenant in ("acme", "zeta"):
        f = {"tenant": tenant}
        assert {h.chunk.tenant for h in vector_search(store, same[0], 10, f)} == {tenant}
        assert {h.chunk.tenant for h in keyword_search(store, "gradient weights", 10, f)} == {
            tenant
        }
        assert [r.tenant for r in store.documents(tenant)] == [tenant]
        assert store.info(f).chunks == 2
    assert store.documents("nobody") == []


# --------------------------------------------------------------------- BM25

BM25_CORPUS = [
    (
        "Neural networks",
        ("Neural networks", "Training"),
        "Neural networks learn weights by gradient descent; weights weights.",
    ),
    (
        "Gradient descent",
        ("Gradient descent", "Optimization", "SGD"),
        "Stochastic gradient descent updates the weights of a network.",
    ),
    (
        "Attention",
        ("Attention", "Transformers"),
        "Attention is all the networks need: attention, attention.",
    ),
    (
        "Convolutions",
        (),
        "Convolutional layers share weights across positions in images and images.",
    ),
    (
        "Recurrent networks",
        ("Recurrent networks", "LSTM"),
        "Gated units keep long memories; running networks were having trouble.",
    ),
    (
        "Dropout",
        ("Dropout",),
        "Dropout zeroes activations at random during training to fight overfitting.",
    ),
    (
        "Batch normalization",
        ("Batch normalization",),
        "Normalizing activations with minibatch statistics speeds up training of deep networks.",
    ),
    (
        "Café notes",
        ("Naïve Bayes",),
        "A naïve classifier at the café counts words; counting is cheap.",
    ),
]
BM25_QUERIES = [
    "weights",
    "gradient networks",
    "networks networks attention",
    "training activations",
    "naive cafe counting",
    "the running of images",
    "LSTM optimization transformers",
]


def reference_bm25(
    query: str, boosts: FieldBoosts, k1: float = 1.2, b: float = 0.75
) -> dict[str, float]:
    """Best boosted field of Lucene-variant BM25 (with the (k1+1) factor), each field
    over its own statistics (chunks whose field has no token are not counted);
    written out here independently of the stores."""
    fields = {
        "title": [t for t, _, _ in BM25_CORPUS],
        "headings": [" > ".join(h) for _, h, _ in BM25_CORPUS],
        "text": [x for _, _, x in BM25_CORPUS],
    }
    weights = {"title": boosts.title, "headings": boosts.headings, "text": boosts.text}
    q = tokenize(query)
    best = [0.0] * len(BM25_CORPUS)
    for name, texts in fields.items():
        docs = [tokenize(t) for t in texts]
        n = sum(1 for d in docs if d)
        avgdl = sum(len(d) for d in docs) / n
        for i, d in enumerate(docs):
            tf = Counter(d)
            s = 0.0
            for term in q:
                if tf[term]:
                    df = sum(1 for other in docs if term in other)
                    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                    s += idf * (k1 + 1) * tf[term] / (tf[term] + k1 * (1 - b + b * len(d) / avgdl))
            best[i] = max(best[i], weights[name] * s)
    return {f"acme/bm{i}/0": s for i, s in enumerate(best) if s > 0}


def test_bm25_scores_equal_the_reference(store: Store) -> None:
    rng = np.random.default_rng(3)
    for i, (title, headings, text) in enumerate(BM25_CORPUS):
        write(store, f"bm{i}", [text], unit(rng, 1), title=title, heading_path=headings)
    store.optimize()
    for boosts in (FieldBoosts(), FieldBoosts(title=1.0, headings=1.0, text=1.0)):
        for query in BM25_QUERIES:
            expected = reference_bm25(query, boosts)
            assert expected, query  # every query matches something
            hits = keyword_search(store, query, 20, boosts=boosts)
            got = {h.chunk.id: h.keyword_score for h in hits}
            assert got.keys() == expected.keys(), query
            for cid, score in expected.items():
                assert got[cid] == pytest.approx(score, rel=1e-4), (query, cid)
            scores = [h.keyword_score or 0.0 for h in hits]
            assert scores == sorted(scores, reverse=True)
    # top-k is the head of the full ranking
    full = keyword_search(store, "networks weights training", 20)
    assert ids(keyword_search(store, "networks weights training", 3)) == ids(full)[:3]
    # a filter restricts the hits but not the corpus statistics
    expected = reference_bm25("weights", FieldBoosts())
    (hit,) = keyword_search(store, "weights", 5, {"doc_id": "bm1"})
    assert hit.keyword_score == pytest.approx(expected["acme/bm1/0"], rel=1e-4)


@pytest.mark.parametrize("query", ["", "   ", "the of and", "!!! ??? ---", "a"])
def test_empty_or_stop_word_queries_return_nothing(store: Store, query: str) -> None:
    write(store, "a", PASSAGES, seed=1)
    assert keyword_search(store, query, 5) == []


@pytest.mark.parametrize(
    "query", ['"unbalanced', "title:x AND (", "a*b?~2 ^3", "'; DROP TABLE x;--"]
)
def test_query_syntax_is_never_interpreted(store: Store, query: str) -> None:
    write(store, "a", PASSAGES, seed=1)
    hits = keyword_search(store, query + " gradient", 5)
    assert ids(hits)[:1] == ["acme/a/0"]


# ------------------------------------------------------------------- vectors


def test_vector_recall_against_exact_search(store: Store) -> None:
    rng = np.random.default_rng(11)
    n_docs, per_doc = 8, 100
    matrix = unit(rng, n_docs * per_doc)
    items = []
    for d in range(n_docs):
        chunks = [make_chunk(f"v{d}", i, f"passage {i}") for i in range(per_doc)]
        items.append(
            DocumentWrite(
                record_for(f"v{d}", chunks), chunks, matrix[d * per_doc : (d + 1) * per_doc]
            )
        )
    store.replace_documents(items)
    store.optimize()
    all_ids = np.array([f"acme/v{i // per_doc}/{i % per_doc}" for i in range(len(matrix))])
    recall = []
    for q in unit(rng, 20):
        sims = matrix @ q
        truth = set(all_ids[np.argsort(-sims)[:10]])
        hits = vector_search(store, q, 10)
        recall.append(len(truth & set(ids(hits))) / 10)
        for h in hits:
            i = int(np.flatnonzero(all_ids == h.chunk.id)[0])
            assert h.vector_score == pytest.approx(float(sims[i]), abs=1e-4)
        assert [h.vector_score for h in hits] == sorted(
            [h.vector_score or 0.0 for h in hits], reverse=True
        )
    assert float(np.mean(recall)) >= 0.95
    with pytest.raises(StoreError):
        vector_search(store, np.ones(DIM + 1, np.float32), 5)


def test_iter_chunks_returns_every_chunk_with_its_vector(store: Store) -> None:
    _, va = write(store, "a", PASSAGES[:4], seed=1)
    _, vb = write(store, "b", PASSAGES[4:], seed=2)
    seen: dict[str, np.ndarray] = {}
    for chunks, vecs in store.iter_chunks(3):
        assert len(chunks) == len(vecs) <= 3
        seen.update({c.id: v for c, v in zip(chunks, vecs, strict=True)})
    assert len(seen) == 6
    np.testing.assert_allclose(seen["acme/a/2"], va[2], atol=1e-6)
    np.testing.assert_allclose(seen["acme/b/1"], vb[1], atol=1e-6)


# ---------------------------------------------------------------- fingerprint


def test_model_fingerprint_round_trip(open_store: Callable[[], Store], backend: str) -> None:
    store = open_store()
    assert store.fingerprint() is None
    store.fingerprint(FP)
    assert store.fingerprint() == FP
    write(store, "a", PASSAGES[:2], seed=1)
    store.close()
    again = open_store()
    assert again.fingerprint() == FP
    assert again.info().chunks == 2
    with pytest.raises(StoreError):
        again.fingerprint(ModelFingerprint(name="wide", dimension=DIM * 2, digest="d" * 64))


def test_rebuild_swaps_in_a_new_model(store: Store) -> None:
    write(store, "a", PASSAGES[:3], seed=1)
    store.fingerprint(FP)
    batches = list(store.iter_chunks(2))
    wide = ModelFingerprint(name="wide", dimension=DIM * 2, digest="e" * 64)
    rng = np.random.default_rng(9)
    count = store.rebuild(
        wide, [(chunks, unit(rng, len(chunks), DIM * 2)) for chunks, _ in batches]
    )
    assert count == 3
    assert store.fingerprint() == wide
    assert store.info().chunks == 3
    q = unit(rng, 1, DIM * 2)[0]
    assert len(vector_search(store, q, 5)) == 3
    assert ids(keyword_search(store, "gradient", 5)) == ["acme/a/0"]


def test_a_failed_rebuild_leaves_the_store_as_it_was(store: Store) -> None:
    write(store, "a", PASSAGES[:3], seed=1)
    store.fingerprint(FP)
    (chunks, _), *_ = list(store.iter_chunks(2))
    wide = ModelFingerprint(name="wide", dimension=DIM * 2, digest="e" * 64)
    rng = np.random.default_rng(9)
    good = (chunks, unit(rng, len(chunks), DIM * 2))
    bad = (chunks, unit(rng, len(chunks), DIM))  # the old width: refused mid-copy
    with pytest.raises(StoreError):
        store.rebuild(wide, [good, bad])
    assert store.fingerprint() == FP
    assert store.info().chunks == 3
    assert len(vector_search(store, unit(rng, 1, DIM)[0], 5)) == 3
    assert ids(keyword_search(store, "gradient", 5)) == ["acme/a/0"]


# --------------------------------------------------------------------- crash

_WRITER = textwrap.dedent(
    """
    import importlib.util
    import sys

    import numpy as np

    from ragline.store.base import DocumentWrite

    spec = importlib.util.spec_from_file_location("ragline_store_contract", sys.argv[1])
    contract = importlib.util.module_from_spec(spec)
    sys.modules["ragline_store_contract"] = contract
    spec.loader.exec_module(contract)
    store = contract.STORE_BACKENDS[sys.argv[2]](contract.ContractEnv.from_json(sys.argv[3]))
    rng = np.random.default_rng(0)
    version = 0
    while True:
        version += 1
        items = []
        for d in range(4):
            n = version % 5 + 1
            texts = [f"version {version} part {i} of {d}" for i in range(n)]
            chunks = [contract.make_chunk(f"d{d}", i, t) for i, t in enumerate(texts)]
            record = contract.record_for(f"d{d}", chunks)
            items.append(DocumentWrite(record, chunks, contract.unit(rng, n)))
        store.replace_documents(items)
        print(version, flush=True)
    """
)


def check_consistent(store: Store) -> int:
    """Every document whole at one version (old or new, never both), no duplicates."""
    chunks = all_chunks(store)
    assert len({c.id for c in chunks}) == len(chunks), "duplicate chunks"
    per_doc: dict[str, set[int]] = {}
    for c in chunks:
        per_doc.setdefault(c.doc_id, set()).add(int(c.text.split()[1]))
    for doc, versions in per_doc.items():
        assert len(versions) == 1, (doc, versions)
        (v,) = versions
        assert sum(1 for c in chunks if c.doc_id == doc) == v % 5 + 1, (doc, v)
    hits = keyword_search(store, "version part", 100)
    assert len(set(ids(hits))) == len(hits) == len(chunks)
    return min((next(iter(v)) for v in per_doc.values()), default=0)


@pytest.mark.slow
def test_crash_during_a_write_leaves_old_or_new_chunks(
    backend: str, env: ContractEnv, open_store: Callable[[], Store], tmp_path: Path
) -> None:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(CONTRACT_PY), backend, env.to_json()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    committed = 0
    deadline = time.monotonic() + 60
    try:
        while committed < 8 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            committed = int(line)
        time.sleep(0.01 * (committed % 4))  # land somewhere inside a later write
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert committed >= 8, proc.stderr.read() if proc.stderr else ""

    store = open_store()
    assert check_consistent(store) >= committed - 1
    # the next sync completes exactly: rewrite every document once more
    rng = np.random.default_rng(1)
    final = 10_002
    for d in range(4):
        chunks = [make_chunk(f"d{d}", i, f"version {final} part {i} of {d}") for i in range(3)]
        store.replace_documents([DocumentWrite(record_for(f"d{d}", chunks), chunks, unit(rng, 3))])
    store.optimize()
    assert check_consistent(store) == final
    assert store.info().chunks == 4 * (final % 5 + 1)
    assert sorted(r.doc_id for r in store.documents()) == ["d0", "d1", "d2", "d3"]


# ------------------------------------------------------------------ languages

#: (language, title, text): the same page in five languages plus a Korean one.
LANG_CORPUS = [
    (
        "en",
        "State",
        "A component adds state with the useState hook; state persists between renders.",
    ),
    (
        "es",
        "Estado",
        "Un componente agrega estado con el Hook useState; el estado persiste entre renderizados.",
    ),
    (
        "fr",
        "État",
        "Un composant ajoute un état avec le Hook useState ; l'état persiste entre les rendus.",
    ),
    (
        "ja",
        "状態",
        "コンポーネントは useState フックで状態を追加します。状態はレンダー間で保持されます。",
    ),
    ("zh", "状态", "组件使用 useState Hook 添加状态变量。状态在渲染之间保持不变。"),
    ("ko", "상태", "컴포넌트는 useState 훅으로 상태를 추가합니다."),
]
LANG_QUERIES = [
    "¿Cómo agrega estado un componente?",
    "Comment un composant ajoute-t-il un état ?",
    "コンポーネントに状態を追加するには？",
    "如何向组件添加状态？",
    "컴포넌트 상태 추가",
    "How does a component add state?",
]

#: Every store computes BM25 with ragline.text.bm25 (LanceStore in its in-process
#: index), so every store analyses every language alike.


def _write_lang_corpus(store: Store) -> None:
    rng = np.random.default_rng(5)
    for i, (lang, title, text) in enumerate(LANG_CORPUS):
        write(
            store,
            f"l{i}",
            [text],
            unit(rng, 1),
            title=title,
            heading_path=(title,),
            metadata={"language": lang},
        )
    store.optimize()


def test_language_filter_pushes_down(store: Store) -> None:
    _write_lang_corpus(store)
    assert store.info({"language": "ja"}).chunks == 1
    (hit,) = vector_search(store, unit(np.random.default_rng(9), 1)[0], 5, {"language": "fr"})
    assert hit.chunk.metadata["language"] == "fr"
    # any metadata value is one escaped literal (or parameter): it matches nothing
    assert store.info({"language": "ja' OR 1=1 --"}).chunks == 0


def test_keyword_search_analyses_each_language(store: Store) -> None:
    """Each chunk is analysed in its own language and each query in its detected one;
    every store scores like a reference computed from the analyser here."""
    _write_lang_corpus(store)
    docs = [tokenize(text, lang) for lang, _, text in LANG_CORPUS]
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    for query, want in zip(LANG_QUERIES, ["l1", "l2", "l3", "l4", "l5", "l0"], strict=True):
        q = tokenize(query, detect_language(query))
        expected = {}
        for i, d in enumerate(docs):
            tf = Counter(d)
            s = 0.0
            for term in q:
                if tf[term]:
                    df = sum(1 for other in docs if term in other)
                    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                    s += idf * 2.2 * tf[term] / (tf[term] + 1.2 * (0.25 + 0.75 * len(d) / avgdl))
            if s > 0:
                expected[f"acme/l{i}/0"] = s
        hits = keyword_search(
            store, query, 10, boosts=FieldBoosts(title=0.0, headings=0.0, text=1.0)
        )
        assert hits and hits[0].chunk.doc_id == want, (query, q, ids(hits))
        got = {h.chunk.id: h.keyword_score for h in hits}
        assert got.keys() == expected.keys(), query
        for cid, score in expected.items():
            assert got[cid] == pytest.approx(score, rel=1e-4), (query, cid)


# ------------------------------------------------------- operator filters

#: Front matter of the filter corpus: versions of three types, dates and
#: timestamps, booleans, a null, a list and a nested object (whose keys must not
#: be found as top-level ones).
FRONT_MATTER: dict[str, dict[str, object]] = {
    "f0": {
        "version": 1,
        "date": "2023-06-01",
        "draft": False,
        "status": "published",
        "tags": ["a", "b"],
    },
    "f1": {"version": 2.5, "date": "2024-01-15T10:00:00+00:00", "draft": True, "status": "draft"},
    "f2": {
        "version": "3",
        "date": "2024-03-01",
        "status": "published",
        "nested": {"status": "draft", "version": 9, "deep": {"x": [1, {"y": 2}]}},
    },
    "f3": {"version": 10, "draft": False, "reviewer": None, "status": 'it\'s "quoted"'},
    "f4": {},
    "f5": {"date": "2024-12-31", "status": "archived", "version": 3, "draft": True},
}

#: (filter, the documents it selects), worked out by hand from FRONT_MATTER.
FILTER_CASES: list[tuple[dict[str, object], set[str]]] = [
    ({"status": "published"}, {"f0", "f2"}),
    ({"date": {"$gte": "2024-01-01", "$lte": "2024-03-01"}}, {"f1", "f2"}),  # a date range
    ({"date": {"$gt": "2024-01-15T09:00:00Z"}}, {"f1", "f2", "f5"}),  # dates as dates
    ({"date": {"$lte": "2024-01-15T12:00:00+02:00"}}, {"f0", "f1"}),  # 10:00 UTC
    ({"$or": [{"draft": True}, {"version": {"$gte": 10}}]}, {"f1", "f3", "f5"}),
    ({"version": {"$in": [1, 3]}}, {"f0", "f5"}),  # the string "3" is not 3
    ({"version": {"$nin": [1, 3]}}, {"f1", "f2", "f3"}),  # only chunks that have it
    ({"status": {"$ne": "published"}}, {"f1", "f3", "f5"}),
    ({"$not": {"status": "published"}}, {"f1", "f3", "f4", "f5"}),  # the complement
    ({"draft": {"$exists": False}}, {"f2", "f4"}),
    ({"reviewer": {"$exists": True}}, set()),  # null is not there
    ({"version": {"$gt": 2, "$lt": 5}}, {"f1", "f5"}),
    ({"status": 'it\'s "quoted"'}, {"f3"}),
    ({"$and": [{"chapter": "odd"}, {"$not": {"draft": False}}]}, {"f1", "f5"}),
    ({"has_code": True, "status": {"$in": ["draft", "archived"]}}, {"f1"}),
    ({"page": {"$gte": 2}, "tenant": "acme"}, {"f2", "f3", "f4", "f5"}),
    ({"chapter": {"$ne": "odd"}, "nested": {"$exists": True}}, {"f2"}),
    ({"metadata.status": "draft", "$or": [{"version": 2.5}, {"version": 9}]}, {"f1"}),
]


def _write_filter_corpus(store: Store) -> int:
    rng = np.random.default_rng(11)
    for i, (doc, meta) in enumerate(FRONT_MATTER.items()):
        write(
            store,
            doc,
            [PASSAGES[i % 6], PASSAGES[(i + 1) % 6]],
            unit(rng, 2),
            chapter="odd" if i % 2 else "even",
            has_code=i == 1,
            page=i,
            metadata=dict(meta),
        )
    return 2


def test_operator_filters_select_the_same_chunks_on_every_store(store: Store) -> None:
    from ragline.store.filter_ast import evaluate, parse

    per_doc = _write_filter_corpus(store)
    q = unit(np.random.default_rng(12), 1)[0]
    for filters, docs in FILTER_CASES:
        # the reference evaluator agrees with the hand-worked answer
        ref = {
            c.doc_id
            for c in all_chunks(store)
            if evaluate(
                parse(filters),
                {"chapter": c.chapter, "has_code": c.has_code, "page": c.page, "tenant": c.tenant},
                c.metadata,
            )
        }
        assert ref == docs, filters
        assert store.info(filters).chunks == per_doc * len(docs), filters
        vhits = vector_search(store, q, 50, filters)
        assert {h.chunk.doc_id for h in vhits} == docs, filters
        assert len(vhits) == per_doc * len(docs), filters  # a pre-filter
        khits = keyword_search(store, "gradient attention activations networks", 50, filters)
        assert {h.chunk.doc_id for h in khits} <= docs, filters
