"""The search cache (store/lance_cache.py): a new process's first search builds its
mirror from the cached rows of the table's latest version, without LanceDB, and
answers as the LanceDB-built mirror does; a stale cache is never used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from tests.store.contract import DIM, unit, write

from ragline.embed.base import ModelFingerprint
from ragline.store import lance_memory
from ragline.store.filter_sql import chunk_predicate
from ragline.store.lance import LanceStore
from ragline.store.lance_cache import cache_path, latest_version, read_rows, write_rows
from ragline.store.lance_tables import run
from ragline.store.reads import keyword_candidates, vector_candidates

TEXTS = [
    "Gradient descent follows the negative gradient of the loss.",
    "Stochastic gradient descent samples one minibatch at a time.",
    "Attention weights sum to one over the keys.",
    "Convex functions have a single minimum, so descent finds it.",
]
MODEL = ModelFingerprint("test-model", DIM, "0" * 64)


def index(path: Path) -> LanceStore:
    """An index with a recorded model, two tenants, optimised (so cached)."""
    store = LanceStore(path, dimension=DIM)
    store.fingerprint(MODEL)
    write(store, "a", TEXTS, seed=1)
    write(store, "b", TEXTS[:2], seed=2, tenant="o'brien", chapter="Other")
    store.optimize()
    return store


def versions(store: LanceStore) -> Path:
    return store.path / f"{store._chunks_name}.lance" / "_versions"


def test_latest_version_reads_the_manifest_names_as_lancedb_does(tmp_path: Path) -> None:
    store = LanceStore(tmp_path / "index", dimension=DIM)
    for n in range(3):
        write(store, f"d{n}", TEXTS[: n + 1], seed=n)
        assert latest_version(versions(store)) == run(store._table().version())
    store.optimize()
    assert latest_version(versions(store)) == run(store._table().version())
    store.rebuild(MODEL, [])  # a new table, its own folder
    assert latest_version(versions(store)) == run(store._table().version())


def test_latest_version_of_v1_names_and_junk(tmp_path: Path) -> None:
    folder = tmp_path / "_versions"
    assert latest_version(folder) is None  # no folder
    folder.mkdir()
    assert latest_version(folder) is None  # no manifest
    for name in ("1.manifest", "12.manifest", "3.manifest", "7.manifest-tmp", "x.manifest"):
        (folder / name).write_bytes(b"")
    assert latest_version(folder) == 12
    v2 = tmp_path / "v2"
    v2.mkdir()
    for version in (5, 40):
        (v2 / f"{2**64 - 1 - version:020d}.manifest").write_bytes(b"")
    assert latest_version(v2) == 40


def test_rows_round_trip_and_only_the_asked_version(tmp_path: Path) -> None:
    rows = pa.table(
        {
            "id": ["x", "y"],
            "vector": pa.array([[0.0] * 4, [1.0] * 4], pa.list_(pa.float32(), 4)),
            "_rowid": pa.array([1, 2], pa.uint64()),
        }
    )
    write_rows(tmp_path, "chunks", 7, rows)
    got = read_rows(tmp_path, "chunks", 7)
    assert got is not None and got.rows.equals(rows) and got.dimension == 4
    assert read_rows(tmp_path, "chunks", 8) is None  # another version
    assert read_rows(tmp_path, "chunks_1", 7) is None  # another table
    path = cache_path(tmp_path, "chunks")
    path.write_bytes(path.read_bytes()[:100])  # torn or damaged: ignored
    assert read_rows(tmp_path, "chunks", 7) is None
    assert [p.name for p in path.parent.iterdir()] == ["chunks.arrow"]  # no temp left


def test_a_new_reader_builds_from_the_cache_and_answers_alike(tmp_path: Path) -> None:
    writer = index(tmp_path / "index")
    version = run(writer._table().version())
    assert read_rows(writer.path, "chunks", version) is not None  # optimize() wrote it
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    rng = np.random.default_rng(3)
    for scope in (None, {"tenant": "acme"}, {"tenant": "o'brien"}, {"chapter": "Other"}):
        q = unit(rng, 1)[0]
        got, want = vector_candidates(reader, q, 5, scope), vector_candidates(plain, q, 5, scope)
        assert [i for i, _ in got] == [i for i, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
        got = keyword_candidates(reader, "gradient descent", 10, scope)
        want = keyword_candidates(plain, "gradient descent", 10, scope)
        assert sorted(i for i, _ in got) == sorted(i for i, _ in want)
    assert reader._mirror is not None and reader._mirror._snapshot is not None
    assert reader._mirror._snapshot.version == version
    ids = ["acme/a/0", "o'brien/b/1"]
    rows = reader.chunks_with_vectors(ids)
    stored = plain.chunks_with_vectors(ids)
    assert sorted(rows) == sorted(stored) == sorted(ids)
    for i in ids:
        assert rows[i][0] == stored[i][0]
        np.testing.assert_array_equal(rows[i][1], stored[i][1])


def test_a_write_after_the_cache_is_seen_by_a_new_reader(tmp_path: Path) -> None:
    writer = index(tmp_path / "index")
    write(writer, "c", ["Kernels map inputs to a feature space."], seed=9)  # not optimised
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    found = keyword_candidates(reader, "kernels feature space", 10)
    assert "acme/c/0" in [i for i, _ in found]


def test_the_tenant_mask_comes_from_the_held_columns(tmp_path: Path) -> None:
    """Read from the predicates the filter compiler writes, so a change of its
    spelling shows here, not as a silent LanceDB query per new filter."""
    index(tmp_path / "index")
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    snap = reader._mirrored(wait=True)
    assert snap is not None

    def held(filters: dict[str, object]) -> object:
        return lance_memory.held_equality(snap, chunk_predicate(filters, "datafusion"))

    mask = held({"tenant": "o'brien"})
    assert isinstance(mask, np.ndarray) and int(mask.sum()) == 2
    none = held({"tenant": "nobody"})
    assert isinstance(none, np.ndarray) and not none.any()
    assert held({"chunk_index": 1}) is None  # LanceDB's job


def test_a_rebuild_caches_the_new_table_and_drops_the_old(tmp_path: Path) -> None:
    writer = index(tmp_path / "index")
    old = cache_path(writer.path, "chunks")
    assert old.is_file()
    writer.rebuild(MODEL, writer.iter_chunks())
    assert not old.is_file()
    assert cache_path(writer.path, writer._chunks_name).is_file()
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    assert len(keyword_candidates(reader, "gradient", 10)) == 4  # a/0, a/1, b/0, b/1


def test_a_table_too_large_for_the_foreground_is_not_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = index(tmp_path / "index")
    assert cache_path(writer.path, "chunks").is_file()
    import ragline.store.lance as lance_module

    monkeypatch.setattr(lance_module, "BACKGROUND_ROWS", 3)
    write(writer, "c", TEXTS, seed=4)
    writer.optimize()
    assert not cache_path(writer.path, "chunks").is_file()


def test_a_cold_search_never_imports_lancedb(tmp_path: Path) -> None:
    """The first search of a new process on a cached index: rows from the cache,
    the tenant filter from the held columns, hits from memory; neither LanceDB nor
    pyarrow.compute (≈ 0.1 CPU-s) nor asyncio is imported."""
    index(tmp_path / "index")
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parents[2])!r})\n"
        "from tests.store.contract import DIM, unit\n"
        "import numpy as np\n"
        "from ragline.store.lance import LanceStore\n"
        "from ragline.store.reads import vector_search\n"
        f"store = LanceStore.open({str(tmp_path / 'index')!r})\n"
        "q = unit(np.random.default_rng(1), 1)[0]\n"
        "hits = vector_search(store, q, 3, {'tenant': 'acme'})\n"
        "heavy = ('lancedb', 'pyarrow.compute', 'asyncio')\n"
        "print(json.dumps([len(hits), [m for m in heavy if m in sys.modules]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [3, []]


def test_neighbours_come_from_the_held_columns_as_lancedb_gives_them(tmp_path: Path) -> None:
    index(tmp_path / "index")
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    for doc, wanted in (("a", None), ("a", [0, 2]), ("a", [3, 9]), ("b", [1]), ("zz", None)):
        got = reader.chunks_by_index(doc, wanted)
        assert got == plain.chunks_by_index(doc, wanted)
        assert [c.chunk_index for c in got] == sorted(c.chunk_index for c in got)
    assert len(reader.chunks_by_index("a")) == len(TEXTS)
    assert reader._mirror is not None and reader._mirror._snapshot is not None


def test_a_cache_without_every_chunk_column_is_a_miss(tmp_path: Path) -> None:
    """A file another version of ragline wrote (columns missing) is never used."""
    writer = index(tmp_path / "index")
    version = run(writer._table().version())
    cached = read_rows(writer.path, "chunks", version)
    assert cached is not None
    write_rows(writer.path, "chunks", version, cached.rows.drop_columns(["text"]))
    assert read_rows(writer.path, "chunks", version, ["text"]) is None
    reader = LanceStore(tmp_path / "index", dimension=DIM)
    got = keyword_candidates(reader, "gradient descent", 10)
    plain = LanceStore(tmp_path / "index", dimension=DIM, memory_index=False)
    want = keyword_candidates(plain, "gradient descent", 10)
    assert sorted(i for i, _ in got) == sorted(i for i, _ in want)
    hits = reader.chunks_with_vectors(["acme/a/0"])
    assert hits["acme/a/0"][0].text == TEXTS[0]  # from LanceDB's rows, text and all
