"""The LanceDB mirror (store/lance_memory.py): the same answers as LanceDB's own
queries, and always the table's latest version."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.store.contract import DIM, unit, write

from ragline.store import lance_memory
from ragline.store.base import CandidateQuery
from ragline.store.keyword_index import KeywordIndex
from ragline.store.lance import LanceStore
from ragline.store.reads import keyword_candidates, vector_candidates, vector_search
from ragline.store.stages import STAGES
from ragline.store.vector_index import VectorIndex
from ragline.types import FieldBoosts, Filters, Fused

TEXTS = [
    "Gradient descent follows the negative gradient of the loss.",
    "Stochastic gradient descent samples one minibatch at a time.",
    "Attention weights sum to one over the keys.",
    "Convex functions have a single minimum, so descent finds it.",
    "Bayes rule turns a prior and a likelihood into a posterior.",
]


def weighted(
    store: LanceStore,
    vector: Any,
    text: str,
    k: int,
    filters: Filters | None = None,
    boosts: FieldBoosts | None = None,
    weights: tuple[float, float] = (0.4, 0.6),
    limit: int | None = None,
) -> tuple[list[Fused] | None, dict[str, float]]:
    """The store's weighted-hybrid candidates and their milliseconds."""
    found = store.candidates(CandidateQuery(k, vector, text, filters, boosts, weights, limit))
    return found.fused, found.ms


@pytest.fixture(params=["float32", "int8", "bm25-pruned"])
def pair(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[LanceStore, LanceStore]:
    """The same index opened with the mirror (float32 vectors, or int8 codes + rerank,
    or BM25 with MaxScore pruning at any size) and with LanceDB's own queries."""
    int8_rows = 0 if request.param == "int8" else 1_000_000
    prune_rows = 0 if request.param == "bm25-pruned" else 1_000_000
    mirrored = LanceStore(
        tmp_path / "index", dimension=DIM, int8_rows=int8_rows, bm25_prune_rows=prune_rows
    )
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    write(mirrored, "a", TEXTS, seed=1)
    write(mirrored, "b", TEXTS[:3], seed=2, tenant="other", title="Other Notes")
    mirrored.optimize()  # LanceDB's BM25 statistics are exact after optimize()
    return mirrored, plain


def test_both_paths_rank_alike_with_filters(pair: tuple[LanceStore, LanceStore]) -> None:
    mirrored, plain = pair
    rng = np.random.default_rng(5)
    scopes: list[Filters | None] = [None, {"tenant": "acme"}, {"tenant": "other"}, {"doc_id": "a"}]
    for scope in scopes:
        q = unit(rng, 1)[0]
        got, want = vector_candidates(mirrored, q, 4, scope), vector_candidates(plain, q, 4, scope)
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
        for boosts in (None, FieldBoosts(title=0.5)):
            got = keyword_candidates(mirrored, "gradient descent notes", 10, scope, boosts)
            want = keyword_candidates(plain, "gradient descent notes", 10, scope, boosts)
            assert sorted(i for i, _ in got) == sorted(i for i, _ in want)
            np.testing.assert_allclose(
                sorted(s for _, s in got), sorted(s for _, s in want), rtol=1e-5
            )


def test_rewritten_rows_and_compaction_are_followed(tmp_path: Path) -> None:
    """A chunk rewritten under the same id (new title) is re-analysed; a compaction
    (every row id changes) leaves the answers as they were."""
    store = LanceStore(tmp_path / "index", dimension=DIM)
    write(store, "a", TEXTS, seed=1)
    assert keyword_candidates(store, "platypus", 5) == []
    write(store, "a", TEXTS, seed=1, title="Platypus Notes")
    hits = keyword_candidates(store, "platypus", 10)
    assert len(hits) == len(TEXTS)
    ask = CandidateQuery(10, unit(np.random.default_rng(3), 1)[0], "descent")
    before = store.candidates(ask)
    store.optimize()
    after = store.candidates(ask)
    assert (after.vector, after.keyword) == (before.vector, before.keyword)


def test_a_write_by_another_store_is_seen_by_the_next_search(tmp_path: Path) -> None:
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    writer = LanceStore(tmp_path / "index", dimension=DIM)
    write(writer, "a", TEXTS[:2], seed=1)
    assert len(keyword_candidates(reader, "gradient", 10)) == 2
    write(writer, "b", TEXTS[2:], seed=2)
    assert {i for i, _ in keyword_candidates(reader, "descent", 10)} == {
        "acme/a/0",
        "acme/a/1",
        "acme/b/1",
    }
    writer.delete_document("a")
    assert [i for i, _ in keyword_candidates(reader, "gradient", 10)] == []
    chunks = reader.chunks_with_vectors(["acme/b/0", "acme/a/0"])
    assert list(chunks) == ["acme/b/0"]


def test_rows_come_from_disk_above_the_memory_limit(tmp_path: Path) -> None:
    small = LanceStore(tmp_path / "index", dimension=DIM, memory_rows=2)
    _, vecs = write(small, "a", TEXTS, seed=1)
    got = small.chunks_with_vectors(["acme/a/3", "acme/a/0"])
    assert [got[i][0].text for i in ("acme/a/0", "acme/a/3")] == [TEXTS[0], TEXTS[3]]
    np.testing.assert_allclose(got["acme/a/3"][1], vecs[3], rtol=1e-6)


def test_rows_above_the_memory_limit_are_the_stored_chunks_and_follow_writes(
    tmp_path: Path,
) -> None:
    """Above ``memory_rows`` a hit's columns come from memory (dictionary-encoded) and
    its text from LanceDB: the chunk is the one stored, field for field, also after a
    rewrite under the same ids and a delete."""
    store = LanceStore(tmp_path / "index", dimension=DIM, memory_rows=2)
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    written, vecs = write(store, "a", TEXTS, seed=1, page=None, metadata={"lang": "en"})
    write(store, "b", TEXTS[:2], seed=2, tenant="other", has_code=True, page=7)
    ids = ["other/b/1", "acme/a/4", "missing", "acme/a/0", "acme/a/4"]
    got = store.chunks_with_vectors(ids)
    snap = store._mirror._snapshot  # type: ignore[union-attr]
    assert snap is not None and not snap.holds_rows and snap.held is not None
    assert "text" not in snap.held.names
    assert list(got) == ["other/b/1", "acme/a/4", "acme/a/0"]
    assert got["acme/a/4"][0] == written[4]
    want = plain.chunks_with_vectors(ids)
    assert {i: c for i, (c, _) in got.items()} == {i: c for i, (c, _) in want.items()}
    np.testing.assert_array_equal(got["acme/a/0"][1], vecs[0])
    write(store, "a", TEXTS[:3], seed=3, title="Rewritten Notes", heading_path=("New",))
    got = store.chunks_with_vectors(["acme/a/4", "acme/a/2"])
    assert list(got) == ["acme/a/2"]
    rewritten = got["acme/a/2"][0]
    assert (rewritten.title, rewritten.heading_path) == ("Rewritten Notes", ("New",))
    assert rewritten == plain.chunks_with_vectors(["acme/a/2"])["acme/a/2"][0]
    hits = vector_search(store, unit(np.random.default_rng(4), 1)[0], 5)
    stored = plain.chunks_with_vectors([h.chunk.id for h in hits])
    assert len(hits) == 5 and [h.chunk for h in hits] == [stored[h.chunk.id][0] for h in hits]


@pytest.mark.parametrize("dims", [0, 8])
def test_a_table_growing_past_the_float32_limit_is_rebuilt_as_int8(
    tmp_path: Path, dims: int
) -> None:
    """Past ``memory_rows`` the mirror keeps int8 codes (of ``dims`` principal
    components) + float16 rows: the next refresh reads every row again in that layout,
    the ranking stays LanceDB's, also after a further write and a delete."""
    store = LanceStore(
        tmp_path / "index", dimension=DIM, memory_rows=5, int8_rows=10, int8_dims=dims
    )
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    write(store, "a", TEXTS, seed=1)
    q = unit(np.random.default_rng(8), 1)[0]
    vector_candidates(store, q, 3)
    snap = store._mirror._snapshot  # type: ignore[union-attr]
    assert snap is not None and snap.vectors.layout.float32 and not snap.vectors.layout.int8
    write(store, "b", TEXTS, seed=2)
    got = vector_candidates(store, q, 6)
    snap = store._mirror._snapshot  # type: ignore[union-attr]
    assert snap is not None and snap.rows == 10 and snap.vectors.codes is not None
    assert snap.vectors.matrix is None and snap.texts is None
    assert snap.held is not None and snap.held.names == lance_memory.MEMORY_COLUMNS
    assert snap.vectors.codes.shape[1] == (dims or DIM)
    want = vector_candidates(plain, q, 6)
    assert [i for i, _ in got] == [i for i, _ in want]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=2e-3)
    write(store, "c", TEXTS[:2], seed=3)
    store.delete_document("a")
    got = vector_candidates(store, q, 20, {"tenant": "acme"})
    snap = store._mirror._snapshot  # type: ignore[union-attr]
    assert snap is not None and snap.rows == 7
    want = vector_candidates(plain, q, 20, {"tenant": "acme"})
    assert [i for i, _ in got] == [i for i, _ in want] and len(got) == 7


def test_a_settled_table_skips_the_version_call_but_sees_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    writer = LanceStore(tmp_path / "index", dimension=DIM)
    write(writer, "a", TEXTS[:2], seed=1)
    monkeypatch.setattr(lance_memory, "SETTLED_NS", 0)  # every folder counts as settled
    assert len(keyword_candidates(reader, "gradient", 10)) == 2
    assert reader._mirror is not None
    calls = 0
    run = reader._mirror._run

    def counting(coro: Any) -> Any:
        nonlocal calls
        calls += 1
        return run(coro)

    reader._mirror._run = counting
    assert len(keyword_candidates(reader, "gradient", 10)) == 2
    assert calls == 0  # one stat, no LanceDB call
    write(writer, "b", TEXTS[:1], seed=2)
    assert len(keyword_candidates(reader, "gradient", 10)) == 3
    assert calls > 0


def test_a_large_refresh_runs_in_the_background_while_lancedb_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    write(plain, "a", TEXTS, seed=1)
    monkeypatch.setattr(lance_memory, "BACKGROUND_ROWS", 0)  # every refresh is "large"
    store = LanceStore(tmp_path / "index", dimension=DIM)
    assert store._mirror is not None
    want = keyword_candidates(plain, "gradient descent", 10)
    assert keyword_candidates(store, "gradient descent", 10) == want  # LanceDB answered
    store.warm_up()  # waits for the build
    assert store._mirror._snapshot is not None and store._mirror._snapshot.rows == len(TEXTS)
    got = keyword_candidates(store, "gradient descent", 10)
    assert [i for i, _ in got] == [i for i, _ in want]


def test_the_bm25_pruning_size_is_a_setting(tmp_path: Path) -> None:
    from ragline.settings import Settings
    from ragline.store.factory import make_store

    settings = Settings(index_dir=tmp_path / "idx", lance_bm25_prune_rows=7)
    with make_store(settings, DIM) as store:
        assert isinstance(store, LanceStore) and store.bm25_prune_rows == 7


def test_a_mostly_new_table_gets_a_basis_of_its_own_rows(tmp_path: Path) -> None:
    """When most rows are new (a re-ingest, a compaction), the refresh builds afresh:
    the codes' principal components are those of the rows now stored, as a server
    opened now would compute them, not those of a corpus that is gone."""
    opts: dict[str, Any] = {"dimension": DIM, "memory_rows": 5, "int8_rows": 0, "int8_dims": 8}
    store = LanceStore(tmp_path / "index", **opts)
    rng = np.random.default_rng(11)
    old_dirs = unit(rng, 1)[0] * 3
    write(store, "a", TEXTS, unit(rng, 5) + old_dirs, seed=1)
    write(store, "b", TEXTS, unit(rng, 5) + old_dirs, seed=2)
    q = unit(rng, 1)[0]
    vector_candidates(store, q, 3)
    before = store._mirror._snapshot  # type: ignore[union-attr]
    assert before is not None and before.vectors.basis is not None
    store.delete_document("a")
    new_dirs = unit(rng, 1)[0] * 3
    for doc, seed in (("c", 3), ("d", 4)):
        write(store, doc, TEXTS, unit(rng, 5) + new_dirs, seed=seed)
    got = vector_candidates(store, q, 15)
    after = store._mirror._snapshot  # type: ignore[union-attr]
    assert after is not None and after.rows == 15 and after.vectors.basis is not None
    fresh = LanceStore(tmp_path / "index", **opts)
    want = vector_candidates(fresh, q, 15)
    built = fresh._mirror._snapshot  # type: ignore[union-attr]
    assert built is not None and built.vectors.basis is not None
    np.testing.assert_allclose(after.vectors.basis, built.vectors.basis, atol=1e-6)
    assert not np.allclose(after.vectors.basis, before.vectors.basis, atol=1e-3)
    assert got == want


NEVER = 10**12  # a parallel-stages threshold no table reaches


def _both_orders(store: LanceStore, *args: Any, **kw: Any) -> tuple[Any, Any, set[str]]:
    """Weighted candidates with the stages overlapped and in order, and the names of
    the threads the vector scan ran on."""
    threads: set[str] = set()
    search = VectorIndex.search

    def spy(self: VectorIndex, *a: Any) -> Any:
        threads.add(threading.current_thread().name)
        return search(self, *a)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(VectorIndex, "search", spy)
        mp.setattr(STAGES, "load", None)  # overlap even while other processes are busy
        mp.setattr(STAGES, "cores", 2)  # and on a one-core runner
        store.parallel_rows = 0
        overlapped = weighted(store, *args, **kw)
        store.parallel_rows = NEVER
        sequential = weighted(store, *args, **kw)
    return overlapped, sequential, threads


@pytest.mark.parametrize("int8_rows", [0, 1_000_000], ids=["int8", "float32"])
def test_overlapped_stages_give_the_sequential_results(tmp_path: Path, int8_rows: int) -> None:
    """Same ids, scores and ranks bit for bit, with filters, tenants, boosts and k = 0;
    the vector scan did run on the worker thread."""
    store = LanceStore(tmp_path / "index", dimension=DIM, int8_rows=int8_rows)
    rng = np.random.default_rng(11)
    words = " ".join(TEXTS).split()
    texts = [" ".join(rng.choice(words, 12)) for _ in range(300)]
    write(store, "a", texts[:200], seed=1)
    write(store, "b", texts[200:], seed=2, tenant="other")
    scopes: list[Filters | None] = [None, {"tenant": "acme"}, {"tenant": "other"}, {"doc_id": "b"}]
    ran_on: set[str] = set()
    for scope in scopes:
        for boosts in (None, FieldBoosts(title=0.5)):
            for k in (0, 5, 50):
                q = unit(rng, 1)[0]
                args = (q, "gradient descent minimum", k, scope, boosts, (0.4, 0.6), 10)
                overlapped, sequential, threads = _both_orders(store, *args)
                assert overlapped[0] == sequential[0]
                assert overlapped[1].keys() == sequential[1].keys()
                ran_on |= threads
                if k:
                    assert overlapped[0]
    assert any(t.startswith("ragline-stage") for t in ran_on)


def test_overlapped_stages_on_an_empty_table(tmp_path: Path) -> None:
    store = LanceStore(tmp_path / "index", dimension=DIM)
    q = unit(np.random.default_rng(1), 1)[0]
    overlapped, sequential, _ = _both_orders(store, q, "gradient", 10)
    assert overlapped[0] == sequential[0] == []


@pytest.mark.parametrize("parallel_rows", [0, NEVER], ids=["parallel", "sequential"])
@pytest.mark.parametrize("failing", ["vector", "keyword"])
def test_a_failing_stage_fails_the_search_in_either_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel_rows: int, failing: str
) -> None:
    """A stage's error reaches the caller as itself, from the worker thread too."""
    store = LanceStore(tmp_path / "index", dimension=DIM, parallel_rows=parallel_rows)
    write(store, "a", TEXTS, seed=1)
    monkeypatch.setattr(STAGES, "load", None)
    monkeypatch.setattr(STAGES, "cores", 2)

    def broken(*_: Any) -> Any:
        raise MemoryError(f"{failing} stage out of memory")

    target = VectorIndex if failing == "vector" else KeywordIndex
    monkeypatch.setattr(target, "search" if failing == "vector" else "top", broken)
    with pytest.raises(MemoryError, match=failing):
        weighted(store, unit(np.random.default_rng(1), 1)[0], "gradient", 5)
    assert STAGES.in_flight == 0


def test_the_parallel_stages_size_is_a_setting(tmp_path: Path) -> None:
    from ragline.settings import Settings
    from ragline.store.factory import make_store

    store = make_store(Settings(index_dir=tmp_path / "idx", lance_parallel_rows=7), DIM)
    try:
        assert isinstance(store, LanceStore)
        assert store.parallel_rows == 7
    finally:
        store.close()
