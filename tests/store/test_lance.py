"""LanceStore against a real LanceDB folder: writes, both searches, filters, rebuilds.

Vectors are numpy random unit vectors (the embedding model is not needed to test
a store); texts are short real passages so BM25 has real words to rank.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store.base import DocumentWrite, Store, StoreError
from ragline.store.lance import LanceStore
from ragline.store.lance_indexes import VectorIndexPlan, plan_vector_index
from ragline.store.lance_search import sanitize_fts_query
from ragline.store.reads import (
    document_vectors,
    keyword_candidates,
    keyword_search,
    vector_candidates,
    vector_search,
    vectors_for,
)
from ragline.types import Chunk, FieldBoosts

#: The store tests' shared helpers (tests/ has no packages: contract.py by path).
_contract = runpy.run_path(str(Path(__file__).with_name("contract.py")))
DIM: int = _contract["DIM"]
PASSAGES: list[str] = _contract["PASSAGES"]
unit = _contract["unit"]
make_chunk = _contract["make_chunk"]
record_for = _contract["record_for"]
write = _contract["write"]
ids = _contract["ids"]
FP = ModelFingerprint(name="test-model", dimension=DIM, digest="0" * 64)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LanceStore]:
    s = LanceStore(tmp_path / "index", dimension=DIM)
    yield s
    s.close()


# ------------------------------------------------------------------------ basics


def test_is_a_store_and_starts_empty(store: LanceStore) -> None:
    assert isinstance(store, Store)
    assert store.info().chunks == 0
    assert store.documents() == []
    assert store.fingerprint() is None
    assert vector_search(store, unit(np.random.default_rng(0), 1)[0], 5) == []
    assert keyword_search(store, "gradient", 5) == []
    assert list(store.iter_chunks()) == []


def test_every_chunk_field_round_trips(store: LanceStore) -> None:
    a = make_chunk(
        "doc",
        0,
        "Gradient descent with momentum.",
        heading_path=("Optimisation", "Momentum", "Nesterov"),
        has_code=True,
        has_equations=True,
        page=7,
        metadata={"authors": ["Ann", "Bo"], "year": 2024, "nested": {"draft": False}},
    )
    b = make_chunk("doc", 1, "Plain text.", heading_path=(), page=None)
    vecs = unit(np.random.default_rng(1), 2)
    store.replace_documents([DocumentWrite(record_for("doc", [a, b]), [a, b], vecs)])

    assert store.chunks_by_index("doc", [1, 0, 5]) == [a, b]
    got = store.chunks_by_index("doc", [0])[0]
    assert isinstance(got.heading_path, tuple)
    assert got.metadata == {"authors": ["Ann", "Bo"], "year": 2024, "nested": {"draft": False}}
    assert store.documents() == [record_for("doc", [a, b])]
    stored = document_vectors(store, "doc")
    assert set(stored) == {a.content_hash, b.content_hash}
    np.testing.assert_array_equal(stored[a.content_hash], vecs[0])
    by_id = vectors_for(store, [b.id, "missing", b.id])
    assert list(by_id) == [b.id]
    np.testing.assert_array_equal(by_id[b.id], vecs[1])
    assert store.chunks_by_index("doc", []) == []
    assert vectors_for(store, []) == {}


def test_replacing_twice_leaves_no_duplicates(store: LanceStore) -> None:
    write(store, "doc", PASSAGES[:4], seed=1)
    write(store, "other", PASSAGES[4:], seed=2)
    write(store, "doc", PASSAGES[:4], seed=3)  # same chunks again
    chunks, _ = write(store, "doc", [PASSAGES[0], "Momentum accumulates past gradients."], seed=4)

    assert store.info().chunks == 4
    assert store.info({"doc_id": "doc"}).chunks == 2
    all_ids = [c.id for batch, _ in store.iter_chunks(3) for c in batch]
    assert len(all_ids) == len(set(all_ids)) == 4
    assert store.chunks_by_index("doc", [0, 1, 2, 3]) == chunks
    assert [r.doc_id for r in store.documents()] == ["doc", "other"]
    assert store.documents()[0].chunk_count == 2
    # the dropped passage is gone from both searches; the kept one is there once
    assert keyword_search(store, "convolutional", 10, {"doc_id": "doc"}) == []
    assert ids(keyword_search(store, "gradient", 10)).count("acme/doc/0") == 1


def test_batch_write_is_one_swap_of_several_documents(store: LanceStore) -> None:
    write(store, "a", PASSAGES[:3], seed=1)
    write(store, "b", PASSAGES[3:], seed=2)
    rng = np.random.default_rng(3)
    new_a = [make_chunk("a", 0, "Weight decay penalises large weights.")]
    new_b = [make_chunk("b", i, t) for i, t in enumerate(PASSAGES[:2])]
    c = [make_chunk("c", 0, "Residual connections ease optimisation.")]
    store.replace_documents(
        [
            DocumentWrite(record_for("a", new_a), new_a, unit(rng, 1)),
            DocumentWrite(record_for("b", new_b), new_b, unit(rng, 2)),
            DocumentWrite(record_for("c", c), c, unit(rng, 1)),
        ]
    )
    assert store.info().chunks == 4
    assert {d.doc_id: d.chunk_count for d in store.documents()} == {"a": 1, "b": 2, "c": 1}
    assert store.chunks_by_index("b", [0, 1]) == new_b
    store.replace_documents([])  # nothing to do
    assert store.info().chunks == 4


def test_empty_chunk_list_clears_the_document(store: LanceStore) -> None:
    write(store, "doc", PASSAGES[:3])
    store.replace_documents(
        [DocumentWrite(record_for("doc", []), [], unit(np.random.default_rng(0), 0))]
    )
    assert store.info().chunks == 0
    assert [d.chunk_count for d in store.documents()] == [0]


def test_bad_writes_raise_and_change_nothing(store: LanceStore) -> None:
    chunks, _ = write(store, "doc", PASSAGES[:2])
    rng = np.random.default_rng(0)
    rec = record_for("doc", chunks)
    cases: list[tuple[list[DocumentWrite], str]] = [
        ([DocumentWrite(rec, chunks, unit(rng, 3))], "expected 2 vectors"),
        ([DocumentWrite(rec, chunks, unit(rng, 2, DIM + 1))], "dimension 17"),
        ([DocumentWrite(rec, chunks, np.full((2, DIM), np.nan, np.float32))], "NaN"),
        ([DocumentWrite(rec, [chunks[0], chunks[0]], unit(rng, 2))], "duplicate chunk id"),
        ([DocumentWrite(record_for("other", chunks), chunks, unit(rng, 2))], "belongs to"),
        (
            [DocumentWrite(rec, chunks, unit(rng, 2)), DocumentWrite(rec, [], unit(rng, 0))],
            "twice",
        ),
    ]
    for items, message in cases:
        with pytest.raises(StoreError, match=message):
            store.replace_documents(items)
    assert store.chunks_by_index("doc", [0, 1]) == chunks


def test_delete_removes_chunks_from_both_searches_and_the_record(store: LanceStore) -> None:
    rng = np.random.default_rng(5)
    _, vecs = write(store, "keep", PASSAGES[:3], seed=1)
    doomed_vecs = unit(rng, 2)
    write(store, "doomed", ["The zyxomorph appears once.", "Another line."], doomed_vecs)
    assert ids(keyword_search(store, "zyxomorph", 5)) == ["acme/doomed/0"]
    assert ids(vector_search(store, doomed_vecs[0], 1)) == ["acme/doomed/0"]

    store.delete_document("doomed")
    assert keyword_search(store, "zyxomorph", 5) == []
    assert "acme/doomed/0" not in ids(vector_search(store, doomed_vecs[0], 10))
    assert [d.doc_id for d in store.documents()] == ["keep"]
    assert store.info().chunks == 3
    store.optimize()
    assert keyword_search(store, "zyxomorph", 5) == []
    assert ids(vector_search(store, vecs[1], 1)) == ["acme/keep/1"]
    store.delete_document("never-existed")  # no error


def test_new_rows_are_searchable_before_and_after_optimize(store: LanceStore) -> None:
    write(store, "base", PASSAGES, seed=1)
    store.optimize()  # base rows in the FTS index
    info = store.index_info()
    assert info["indexes"]["text_idx"]["unindexed_rows"] == 0
    write(store, "fresh", ["Quokkas photobomb tourists."], seed=2)
    assert store.index_info()["indexes"]["text_idx"]["unindexed_rows"] == 1
    # not indexed yet: LanceDB searches the new fragment exhaustively
    assert ids(keyword_search(store, "quokka", 5)) == ["acme/fresh/0"]
    store.optimize()
    assert store.index_info()["indexes"]["text_idx"]["unindexed_rows"] == 0
    assert ids(keyword_search(store, "quokkas", 5)) == ["acme/fresh/0"]


# ------------------------------------------------------------------------ search


def test_vector_search_is_exact_below_ann_min_rows(store: LanceStore) -> None:
    rng = np.random.default_rng(7)
    all_chunks: list[Chunk] = []
    all_vecs = []
    for d in range(6):
        chunks, vecs = write(
            store, f"d{d}", [f"passage {i}" for i in range(50)], unit(rng, 50), has_code=d % 2 == 0
        )
        all_chunks += chunks
        all_vecs.append(vecs)
    matrix = np.concatenate(all_vecs)
    code = np.array([c.has_code for c in all_chunks])
    for q in unit(rng, 10):
        sims = matrix @ q
        expected = [all_chunks[i].id for i in np.argsort(-sims)[:10]]
        hits = vector_search(store, q, 10)
        assert ids(hits) == expected
        for h in hits:
            assert h.score == h.vector_score
            i = all_chunks.index(h.chunk)
            assert h.vector_score == pytest.approx(float(sims[i]), abs=1e-5)
        masked = np.where(code, sims, -np.inf)
        expected_code = [all_chunks[i].id for i in np.argsort(-masked)[:10]]
        assert ids(vector_search(store, q, 10, {"has_code": True})) == expected_code
    assert vector_search(store, matrix[0], 0) == []
    with pytest.raises(StoreError, match="dimension 8"):
        vector_search(store, np.ones(8, np.float32), 3)


def test_filters_push_down_in_both_searches(store: LanceStore) -> None:
    write(store, "intro", PASSAGES[:3], seed=1, chapter="intro")
    write(store, "cnn", PASSAGES[:3], seed=2, chapter="cnn", has_code=True, page=3)
    write(store, "rnn", PASSAGES[:3], seed=3, chapter="rnn", tenant="globex")
    q = unit(np.random.default_rng(9), 1)[0]

    assert store.info({"chapter": "cnn"}).chunks == 3
    assert store.info({"has_code": True, "chunk_index": 1}).chunks == 1
    assert store.info({"page": 3}).chunks == 3
    assert store.info({"tenant": "globex", "chapter": "intro"}).chunks == 0
    for hits in (
        vector_search(store, q, 10, {"chapter": "cnn"}),
        keyword_search(store, "gradient convolutional attention", 10, {"chapter": "cnn"}),
    ):
        assert {h.chunk.doc_id for h in hits} == {"cnn"}
        assert len(hits) == 3
    hits = keyword_search(store, "attention", 10, {"has_code": False, "tenant": "acme"})
    assert ids(hits) == ["acme/intro/2"]
    assert keyword_search(store, "attention", 10, {"chunk_index": 0}) == []
    # a key that is no chunk field is a metadata key; none of these chunks has it
    assert vector_search(store, q, 3, {"colour": "red"}) == []
    with pytest.raises(ValueError, match="'colour red': not a chunk field nor a metadata key"):
        vector_search(store, q, 3, {"colour red": "x"})
    with pytest.raises(ValueError, match=r"'has_code' .*expects bool"):
        keyword_search(store, "attention", 3, {"has_code": "yes"})


def test_tenants_are_isolated(store: LanceStore) -> None:
    rng = np.random.default_rng(11)
    shared_vecs = unit(rng, 3)
    # doc ids are unique across tenants (the sync layer derives them from tenant + path)
    write(store, "acme-report", PASSAGES[:3], shared_vecs, tenant="acme")
    write(store, "globex-report", PASSAGES[:3], shared_vecs, tenant="globex")  # same texts
    hostile = "acme' OR '1'='1"
    write(store, "evil", ["Attention is all you need."], unit(rng, 1), tenant=hostile)

    for tenant in ("acme", "globex"):
        v = vector_search(store, shared_vecs[0], 10, {"tenant": tenant})
        k = keyword_search(store, "gradient attention", 10, {"tenant": tenant})
        assert {h.chunk.tenant for h in v + k} == {tenant}
        assert len(v) == 3
        assert len(store.documents(tenant)) == 1
    hits = keyword_search(store, "attention", 10, {"tenant": hostile})
    assert [h.chunk.tenant for h in hits] == [hostile]
    assert store.info({"tenant": "x' OR '1'='1"}).chunks == 0
    assert store.documents("x' OR '1'='1") == []


def test_title_and_heading_matches_outrank_body_matches(store: LanceStore) -> None:
    write(store, "body", ["Convolutional kernels slide over images; training needs data."], seed=1)
    write(
        store,
        "titled",
        ["A layer that slides small kernels over an image."],
        seed=2,
        title="Convolutional Networks",
        heading_path=("Convolutional Networks",),
    )
    write(
        store,
        "headed",
        ["Weights let the model look at every position."],
        seed=3,
        heading_path=("Deep Learning Notes", "Attention Pooling"),
    )
    write(store, "body2", ["Attention weights sum to one over the positions."], seed=4)
    for doc in ("filler1", "filler2", "filler3"):  # so BM25 IDF is not degenerate
        write(store, doc, PASSAGES, seed=5)

    assert ids(keyword_search(store, "convolutional", 2)) == ["acme/titled/0", "acme/body/0"]
    assert ids(keyword_search(store, "pooling attention", 1)) == ["acme/headed/0"]
    hits = keyword_search(store, "convolutional", 2)
    assert hits[0].score == hits[0].keyword_score and hits[0].score > hits[1].score > 0
    text_first = FieldBoosts(title=0.05, headings=0.05, text=5.0)
    assert ids(keyword_search(store, "convolutional", 2, boosts=text_first))[0] == "acme/body/0"
    only_titles = FieldBoosts(title=1.0, headings=0.0, text=0.0)
    assert ids(keyword_search(store, "convolutional", 5, boosts=only_titles)) == ["acme/titled/0"]
    assert keyword_search(store, "convolutional", 5, boosts=FieldBoosts(0, 0, 0)) == []


@pytest.mark.parametrize(
    "query",
    [
        'gradient: "descent',
        "(gradient) AND -descent*",
        "gradient~2 OR descent^3",
        "title:gradient",
        "gradient's descent?!",
        "{[gradient]} <descent> \\ / |",
        "gradient && descent || NOT",
        "'; DROP TABLE chunks; --gradient",
    ],
)
def test_punctuation_cannot_break_keyword_search(store: LanceStore, query: str) -> None:
    write(store, "doc", PASSAGES, seed=1)
    assert ids(keyword_search(store, query, 3))[0] == "acme/doc/0"


@pytest.mark.parametrize("query", ["", "   ", "the and of", "?!*~:-()", '"', "a an the"])
def test_empty_or_stop_word_queries_return_nothing(store: LanceStore, query: str) -> None:
    write(store, "doc", PASSAGES, seed=1)
    assert keyword_search(store, query, 5) == []
    assert keyword_search(store, query, 5, {"tenant": "acme"}) == []


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LanceStore]:
    s = LanceStore(tmp_path_factory.mktemp("small") / "index", dimension=DIM)
    write(s, "doc", PASSAGES, seed=1)
    yield s
    s.close()


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(max_size=60))
def test_any_text_is_a_safe_keyword_query(small_store: LanceStore, query: str) -> None:
    hits = keyword_search(small_store, query, 3)
    assert len(hits) <= 3
    assert all(h.keyword_score is not None and h.keyword_score > 0 for h in hits)


def test_vector_index_plan_follows_table_size() -> None:
    small = plan_vector_index(1000, None, ann_min_rows=50_000)
    assert small is None
    exact = plan_vector_index(10_000, None, ann_min_rows=50_000)
    assert exact == VectorIndexPlan("exact", 10_000, 2)
    assert plan_vector_index(30_000, exact, 50_000) is exact  # < 4x growth: keep
    assert plan_vector_index(40_000, exact, 50_000) == VectorIndexPlan("exact", 40_000, 5)
    ann = plan_vector_index(50_000, exact, 50_000)
    assert ann == VectorIndexPlan("ann", 50_000, 7)
    assert plan_vector_index(120_000, ann, 50_000) is ann
    assert plan_vector_index(200_000, ann, 50_000) == VectorIndexPlan("ann", 200_000, 25)
    # shrinking back: exact again below ann_min_rows, no approximate index when tiny
    assert plan_vector_index(20_000, ann, 50_000) == VectorIndexPlan("exact", 20_000, 3)
    assert plan_vector_index(100, ann, 50_000) is None
    assert plan_vector_index(100, exact, 50_000) is exact
    # too many delta segments appended by optimize(): retrained at the same kind
    assert plan_vector_index(60_000, ann, 50_000, segments=8) is ann
    assert plan_vector_index(60_000, ann, 50_000, segments=9) == VectorIndexPlan("ann", 60_000, 8)
    # ann_min_rows = 0: approximate as soon as an index pays at all
    assert plan_vector_index(5000, None, 0) == VectorIndexPlan("ann", 5000, 1)


def test_sanitize_fts_query() -> None:
    assert sanitize_fts_query('gradient: "descent" -x* ~2') == "gradient descent x 2"
    assert sanitize_fts_query("Ünïcode wörds_ok") == "Ünïcode wörds_ok"
    assert sanitize_fts_query("()*") == ""
    assert len(sanitize_fts_query("word " * 5000)) <= 2000


# ----------------------------------------------------------- fingerprint, rebuild


def test_fingerprint_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "index"
    small = ModelFingerprint("small", 8, "1" * 64)
    with LanceStore(path, dimension=DIM) as s:
        s.fingerprint(small)  # still empty: the index takes the model's dimension
        assert (s.fingerprint(), s.dimension) == (small, 8)
        s.fingerprint(FP)
        assert (s.fingerprint(), s.dimension) == (FP, DIM)
        write(s, "doc", PASSAGES[:1])
        with pytest.raises(StoreError, match="8-dim"):
            s.fingerprint(small)
        assert s.fingerprint() == FP
    reopened = LanceStore.open(path)
    assert reopened.fingerprint() == FP
    assert reopened.dimension == DIM
    reopened.close()
    with pytest.raises(StoreError, match="closed"):
        reopened.info()
    with pytest.raises(StoreError, match="no ragline index"):
        LanceStore.open(tmp_path / "nowhere")


def test_rebuild_with_a_new_dimension_swaps_the_whole_index(tmp_path: Path) -> None:
    path = tmp_path / "index"
    writer = LanceStore(path, dimension=DIM)
    reader = LanceStore(path, dimension=DIM)  # another handle, opened before the swap
    writer.fingerprint(FP)
    for d in range(3):
        write(writer, f"d{d}", PASSAGES, seed=d)
    writer.optimize()
    before = {c.id: c for batch, _ in writer.iter_chunks(4) for c in batch}
    new_fp = ModelFingerprint("bigger", 8, "2" * 64)
    rng = np.random.default_rng(3)
    new_vectors: dict[str, Vectors] = {}

    def batches() -> Iterator[tuple[list[Chunk], Vectors]]:
        for chunks, old in writer.iter_chunks(5):
            assert old.shape[1] == DIM
            vecs = unit(rng, len(chunks), 8)
            new_vectors.update(zip([c.id for c in chunks], vecs, strict=True))
            yield chunks, vecs

    assert writer.rebuild(new_fp, batches()) == len(before) == 18
    for store in (writer, reader):
        assert store.fingerprint() == new_fp
        assert store.dimension == 8
        assert store.info().chunks == 18
        q = new_vectors["acme/d1/2"]
        assert ids(vector_search(store, q, 1)) == ["acme/d1/2"]
        assert ids(keyword_search(store, "dropout", 5, {"doc_id": "d2"})) == ["acme/d2/3"]
        with pytest.raises(StoreError, match="dimension 16"):
            vector_search(store, np.ones(DIM, np.float32), 1)
    after = {c.id: c for batch, _ in reader.iter_chunks() for c in batch}
    assert after == before
    assert len(writer.documents()) == 3
    tables = sorted(p.name for p in path.iterdir() if p.name.endswith(".lance"))
    assert tables == ["chunks_1.lance", "documents.lance"]
    # writes keep working on the new table, with the new dimension
    write(writer, "d9", ["Fresh passage after reindex."], unit(rng, 1, 8))
    assert reader.info().chunks == 19
    writer.close()
    reader.close()


def test_failed_rebuild_leaves_the_old_index_serving(store: LanceStore, tmp_path: Path) -> None:
    store.fingerprint(FP)
    _, vecs = write(store, "doc", PASSAGES, seed=1)

    def broken() -> Iterator[tuple[list[Chunk], Vectors]]:
        for chunks, _ in store.iter_chunks(2):
            yield chunks, unit(np.random.default_rng(0), len(chunks), 8)
            raise RuntimeError("embedding server went away")

    with pytest.raises(RuntimeError, match="embedding server went away"):
        store.rebuild(ModelFingerprint("other", 8, "3" * 64), broken())
    assert store.fingerprint() == FP
    assert store.dimension == DIM
    assert ids(vector_search(store, vecs[2], 1)) == ["acme/doc/2"]
    names = sorted(p.name for p in (tmp_path / "index").iterdir())
    assert names == ["chunks.lance", "documents.lance", "meta.json"]

    def wrong_dimension() -> Iterator[tuple[list[Chunk], Vectors]]:
        for chunks, _ in store.iter_chunks():
            yield chunks, unit(np.random.default_rng(0), len(chunks), 4)

    with pytest.raises(StoreError, match="dimension 4"):
        store.rebuild(ModelFingerprint("other", 8, "3" * 64), wrong_dimension())
    assert store.info().chunks == len(PASSAGES)


# ---------------------------------------------------------------- concurrency


def test_long_lived_reader_sees_new_writes(tmp_path: Path) -> None:
    writer = LanceStore(tmp_path / "index", dimension=DIM)
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    assert reader.info().chunks == 0
    write(writer, "doc", ["Platypuses lay eggs."], seed=1)
    assert ids(keyword_search(reader, "platypuses", 3)) == ["acme/doc/0"]
    writer.fingerprint(FP)
    assert reader.fingerprint() == FP
    writer.delete_document("doc")
    assert keyword_search(reader, "platypuses", 3) == []
    writer.optimize()
    assert reader.info().chunks == 0


_WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from pathlib import Path
    from ragline.store.base import DocumentWrite
    from ragline.store.lance import LanceStore
    sys.path.insert(0, sys.argv[2])
    from contract import make_chunk, record_for, unit

    store = LanceStore(Path(sys.argv[1]), dimension=16)
    rng = np.random.default_rng(0)
    version = 0
    while True:
        version += 1
        items = []
        for d in range(4):
            n = version % 5 + 1
            chunks = [make_chunk(f"d{d}", i, f"version {version} part {i}") for i in range(n)]
            items.append(DocumentWrite(record_for(f"d{d}", chunks), chunks, unit(rng, n)))
        store.replace_documents(items)
        print(version, flush=True)
    """
)


def consistent_version(store: LanceStore) -> int:
    """Check one snapshot of the writer's index: no duplicate chunk, every document
    at the same version (a batch is one commit), each with that version's chunk
    count; the same in what both searches return. Returns the version."""
    chunks = [c for batch, _ in store.iter_chunks(7) for c in batch]
    assert len({c.id for c in chunks}) == len(chunks)
    versions = Counter(int(c.text.split()[1]) for c in chunks)
    assert len(versions) == 1, versions
    (version,) = versions
    assert Counter(c.doc_id for c in chunks) == {f"d{d}": version % 5 + 1 for d in range(4)}
    # each candidate search is one snapshot, possibly of a later commit: all the
    # chunks of one version, none twice
    q = unit(np.random.default_rng(version), 1)[0]
    for ranking in (vector_candidates(store, q, 50), keyword_candidates(store, "version part", 50)):
        n = len(ranking) // 4
        assert 1 <= n <= 5 and len(ranking) == 4 * n
        assert {cid for cid, _ in ranking} == {f"acme/d{d}/{i}" for d in range(4) for i in range(n)}
    # hits read their rows after the search (a later commit still): one version,
    # and a chunk gone since the search is dropped, never shown
    for hits in (vector_search(store, q, 50), keyword_search(store, "version part", 50)):
        seen = {int(h.chunk.text.split()[1]) for h in hits}
        assert len(seen) <= 1, seen
        assert all(v >= version for v in seen)
        assert len(set(ids(hits))) == len(hits)
    return version


@pytest.mark.slow
def test_readers_and_kill_9_never_see_a_mix(tmp_path: Path) -> None:
    path = tmp_path / "index"
    reader = LanceStore(path, dimension=DIM)  # opened before the writer exists
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    committed = 0
    try:
        while committed < 12 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            committed = int(line)
            # concurrent reads: whole batches only, and never older than acknowledged
            assert consistent_version(reader) >= committed
        time.sleep(0.05 * (committed % 3))  # land somewhere inside a later write
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert committed >= 12, proc.stderr.read() if proc.stderr else ""

    store = LanceStore(path, dimension=DIM)  # a fresh process would open it like this
    assert consistent_version(store) >= committed
    assert consistent_version(reader) >= committed
    store.optimize()  # the folder is still healthy for writes and maintenance
    write(store, "after", ["Recovered."], seed=1)
    assert reader.info({"doc_id": "after"}).chunks == 1


# ------------------------------------------------------------------ ANN recall


@pytest.mark.slow
def test_ann_index_keeps_recall_above_095(tmp_path: Path) -> None:
    dim, per_doc, docs = 384, 1000, 60
    rng = np.random.default_rng(42)
    centres = rng.standard_normal((600, dim)).astype(np.float32)
    labels = rng.integers(0, len(centres), docs * per_doc)
    raw = centres[labels] + 0.7 * rng.standard_normal((len(labels), dim)).astype(np.float32)
    matrix = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)
    store = LanceStore(tmp_path / "index", dimension=dim, ann_min_rows=50_000)

    def write_docs(first: int, last: int) -> None:
        items = []
        for d in range(first, last):
            tenant = f"t{d % 6}"
            chunks = [make_chunk(f"d{d}", i, f"passage {i}", tenant=tenant) for i in range(per_doc)]
            rec = record_for(f"d{d}", chunks, tenant)
            vecs = matrix[d * per_doc : (d + 1) * per_doc]
            items.append(DocumentWrite(rec, chunks, vecs))
        store.replace_documents(items)

    ids_all = np.array(
        [f"t{(i // per_doc) % 6}/d{i // per_doc}/{i % per_doc}" for i in range(len(matrix))]
    )
    tenant_of = (np.arange(len(matrix)) // per_doc) % 6
    queries = matrix[rng.integers(0, len(matrix), 100)] + 0.02 * rng.standard_normal(
        (100, dim)
    ).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    for first in range(0, 40, 20):
        write_docs(first, first + 20)
    store.optimize()
    info = store.index_info()  # 40k < ann_min_rows: an index, but searched exhaustively
    assert (info["vector_index"], info["vector_search"]) == ("IvfFlat", "exact")
    head = matrix[:40_000]
    for q in queries[:20]:
        expected = list(ids_all[np.argsort(-(head @ q))[:10]])
        assert ids(vector_search(store, q, 10)) == expected

    write_docs(40, docs)
    store.optimize()
    info = store.index_info()
    assert info["rows"] == docs * per_doc
    assert (info["vector_index"], info["vector_search"]) == ("IvfSq", "approximate")
    recall, recall_filtered = [], []
    for q in queries:
        sims = matrix @ q
        truth = set(ids_all[np.argsort(-sims)[:10]])
        hits = vector_search(store, q, 10)
        recall.append(len(truth & set(ids(hits))) / 10)
        for h in hits:  # refined: the reported score is the exact cosine
            i = int(np.flatnonzero(ids_all == h.chunk.id)[0])
            assert h.vector_score == pytest.approx(float(sims[i]), abs=1e-4)
        masked = np.where(tenant_of == 2, sims, -np.inf)
        truth_t = set(ids_all[np.argsort(-masked)[:10]])
        hits_t = vector_search(store, q, 10, {"tenant": "t2"})
        assert {h.chunk.tenant for h in hits_t} == {"t2"}
        recall_filtered.append(len(truth_t & set(ids(hits_t))) / 10)
    assert np.mean(recall) >= 0.95
    assert np.mean(recall_filtered) >= 0.95
    store.close()


def test_two_processes_opening_one_fresh_index_both_succeed(tmp_path: Path) -> None:
    """A server and an ingest started together on a new index race on its first
    commits (table and index creation); LanceDB rejects the loser's commit as a
    retryable conflict, which the store retries instead of failing the command."""
    script = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from ragline.store.lance import LanceStore
        start = float(sys.argv[2])
        while time.time() < start:
            pass
        LanceStore(Path(sys.argv[1]), dimension=384).close()
        """
    )
    for attempt in range(3):
        index = tmp_path / f"fresh-{attempt}"
        start = str(time.time() + 3.0)  # both past their imports before they open
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(index), start],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-2000:]
        assert LanceStore(index, dimension=384).info(None).chunks == 0
