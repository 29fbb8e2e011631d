"""Rows of the final hits (``Retriever.search`` → ``LanceStore.chunks_with_vectors`` →
the mirror's held columns): every field of every hit is what LanceDB's own read of
the rows gives, in every mirror layout, search mode, merge method, filter,
threshold and cut."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.embed.base import Embedder, Vectors
from ragline.retrieve.retriever import Retriever
from ragline.settings import Settings
from ragline.store.base import CandidateQuery, DocumentWrite
from ragline.store.lance import LanceStore
from ragline.store.reads import vectors_for
from ragline.types import Chunk, DocumentRecord, Filters, Hit

#: doc id → (chapter, title, chunks as (section, text)); fields vary so that a
#: value taken from the wrong row or column shows.
DOCS: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "volcano": (
        "fire",
        "Volcanoes — Überblick",
        [
            ("Magma", "A volcano erupts when magma rises; lava cools into basalt rock."),
            ("Ash", "Ash clouds from an eruption travel far and cool the climate."),
        ],
    ),
    "river": (
        "water",
        "Rivers",
        [
            ("", "A river meanders across its floodplain and builds a delta at the sea."),
            ("Deltas", "Sediment settles where the river meets the sea, building land."),
        ],
    ),
    "glacier": (
        "water",
        "Glaciers",
        [("Valleys", "A glacier of ice carves a valley and leaves moraines of rock behind.")],
    ),
    "desert": (
        "",
        "Deserts",
        [("Dunes", "Dunes of sand move with the wind across the dry desert.")],
    ),
    "ocean": (
        "water",
        "Oceans",
        [
            ("Currents", "Ocean currents carry warm water from the equator toward the poles."),
            ("Tides", "The moon's pull raises tides in the ocean twice a day."),
        ],
    ),
    "soil": (
        "fire",
        "Soil",
        [("", "Soil forms as rock weathers and organic matter decays.")],
    ),
}
QUERIES = ["how does lava turn into rock", "warm water ocean", "valley carved by ice", "sand"]
#: Mirror layouts: every column and float32 vectors in memory (the default below
#: 200k rows); float32 only; text and vectors read from LanceDB (int8 codes +
#: float16 rows, as above the memory limit).
LAYOUTS: dict[str, dict[str, Any]] = {
    "in memory": {},
    "float32": {"int8_rows": 1_000_000},
    "text on disk": {"memory_rows": 2},
}


def chunks_of(doc_id: str, make_chunk: Callable[..., Chunk]) -> list[Chunk]:
    chapter, title, parts = DOCS[doc_id]
    out = []
    for n, (section, text) in enumerate(parts):
        out.append(
            make_chunk(
                f"{doc_id}/{n}",
                text=text,
                doc_id=doc_id,
                chunk_index=n,
                title=title,
                chapter=chapter,
                section=section,
                heading_path=(title, section) if section else (title,),
                anchor=section.lower(),
                page=None if n == 0 else n + 10,
                has_code=n == 1,
                has_equations=doc_id == "ocean",
                metadata={"language": "en", "tags": [doc_id, "earth"], "depth": {"n": n}}
                if n == 0
                else {},
                start_char=100 * n,
                end_char=100 * n + len(text),
            )
        )
    return out


@pytest.fixture(scope="module")
def index(
    tmp_path_factory: pytest.TempPathFactory, embedder: Embedder, make_chunk: Callable[..., Chunk]
) -> Path:
    path = tmp_path_factory.mktemp("rows") / "lance"
    store = LanceStore(path, dimension=embedder.dimension)
    writes = []
    for i, doc_id in enumerate(DOCS):
        chunks = chunks_of(doc_id, make_chunk)
        record = DocumentRecord(
            doc_id, "default", chunks[0].source, f"h{i}", len(chunks), 20, "", "", "md", ""
        )
        vectors = embedder.embed_documents([c.embed_text for c in chunks])
        writes.append(DocumentWrite(record, chunks, vectors))
    store.replace_documents(writes)
    store.optimize()
    store.close()
    return path


@pytest.fixture(params=list(LAYOUTS))
def stores(
    index: Path, embedder: Embedder, request: pytest.FixtureRequest
) -> Iterator[tuple[LanceStore, LanceStore]]:
    """(the index with the mirror in one layout, the index with LanceDB's own reads)."""
    mirrored = LanceStore(index, dimension=embedder.dimension, **LAYOUTS[request.param])
    plain = LanceStore(index, dimension=embedder.dimension, memory_index=False)
    yield mirrored, plain
    mirrored.close()
    plain.close()


class RowsFromLanceDB:
    """``ranking``'s candidates with ``rows``' chunks and vectors: a search whose
    ranking is the mirror's and whose rows are LanceDB's own read."""

    def __init__(self, ranking: LanceStore, rows: LanceStore) -> None:
        self.ranking = ranking
        self.rows = rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ranking, name)

    def chunks_with_vectors(self, ids: Sequence[str]) -> dict[str, tuple[Chunk, Vectors]]:
        return self.rows.chunks_with_vectors(ids)

    def vectors_for(self, ids: Sequence[str]) -> dict[str, Vectors]:
        return vectors_for(self.rows, ids)


def every_field(hit: Hit) -> dict[str, Any]:
    """Every field of a hit and of its chunk, with the score's type."""
    out = {f.name: getattr(hit, f.name) for f in fields(hit) if f.name != "chunk"}
    out |= {f"chunk.{f.name}": getattr(hit.chunk, f.name) for f in fields(hit.chunk)}
    out["types"] = [type(v).__name__ for v in out.values()]
    return out


@pytest.mark.parametrize("merge", ["weighted", "rrf"])
def test_hits_are_the_stored_rows_field_by_field(
    stores: tuple[LanceStore, LanceStore], embedder: Embedder, merge: str
) -> None:
    mirrored, plain = stores
    scopes: list[Filters | None] = [None, {"chapter": "water"}, {"doc_id": "volcano"}]
    seen = 0
    for threshold in (0.0, 0.2):
        s = Settings(_env_file=None, hybrid_merge_method=merge, relevance_threshold=threshold)
        fast = Retriever(mirrored, embedder, s)
        reference = Retriever(RowsFromLanceDB(mirrored, plain), embedder, s)
        for mode in ("hybrid", "vector", "bm25"):
            for scope in scopes:
                for top_k in (1, 3, 20):
                    for q in QUERIES:
                        args: dict[str, Any] = {"mode": mode, "top_k": top_k, "filters": scope}
                        got = fast.search(q, expand=0, **args).hits
                        want = reference.search(q, expand=0, **args).hits
                        assert [every_field(h) for h in got] == [every_field(h) for h in want]
                        seen += len(got)
                        if mode == "hybrid":  # keyword-only hits get the cosine too
                            assert all(h.vector_score is not None for h in got)
    assert seen > 300  # the searches returned hits to compare


def test_rows_are_lancedbs_for_any_ids(
    stores: tuple[LanceStore, LanceStore], make_chunk: Callable[..., Chunk]
) -> None:
    """Repeats, unknown ids and no ids at all; chunks and vectors equal bit for bit."""
    mirrored, plain = stores
    ids = ["ocean/1", "nope", "volcano/0", "ocean/1", "soil/0", "river/1"]
    got, want = mirrored.chunks_with_vectors(ids), plain.chunks_with_vectors(ids)
    assert list(got) == ["ocean/1", "volcano/0", "soil/0", "river/1"]
    assert set(want) == set(got)
    vectors, stored = vectors_for(mirrored, ids), vectors_for(plain, ids)
    assert set(vectors) == set(stored) == set(got)
    for cid, (chunk, vector) in got.items():
        assert chunk == want[cid][0]
        np.testing.assert_array_equal(vector, want[cid][1])
        np.testing.assert_array_equal(vectors[cid], stored[cid])
        assert vectors[cid].dtype == stored[cid].dtype == np.float32
    assert got["volcano/0"][0] == chunks_of("volcano", make_chunk)[0]
    assert mirrored.chunks_with_vectors([]) == {} and mirrored.chunks_with_vectors(["x"]) == {}
    assert vectors_for(mirrored, []) == {} and vectors_for(mirrored, ["x"]) == {}


def test_a_search_with_no_candidates_reads_no_rows(
    stores: tuple[LanceStore, LanceStore], embedder: Embedder
) -> None:
    mirrored, _ = stores
    retriever = Retriever(mirrored, embedder, Settings(_env_file=None))
    assert retriever.search("?!", mode="bm25", expand=0).hits == []
    assert retriever.search("lava", mode="hybrid", filters={"doc_id": "none"}).hits == []
    with pytest.raises(ValueError, match="top_k"):
        retriever.search("lava", top_k=0)
    qv = embedder.embed_query("lava")
    assert mirrored.candidates(CandidateQuery(0, qv, "lava", weights=(0.4, 0.6))).fused == []


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_rows_stay_lancedbs_across_refreshes(
    tmp_path: Path, embedder: Embedder, make_chunk: Callable[..., Chunk], layout: str
) -> None:
    """A refresh keeps the old rows' held columns and adds the new rows': after a
    rewrite (new title, same ids), an added document and a delete by another store,
    every chunk on the mirror is the stored one."""
    path = tmp_path / "lance"
    writer = LanceStore(path, dimension=embedder.dimension, memory_index=False)
    mirrored = LanceStore(path, dimension=embedder.dimension, **LAYOUTS[layout])

    def put(doc_id: str, title: str | None = None) -> None:
        chunks = chunks_of(doc_id, make_chunk)
        if title is not None:
            chunks = [make_chunk(c.id, **{**vars_of(c), "title": title}) for c in chunks]
        record = DocumentRecord(doc_id, "default", chunks[0].source, doc_id, 2, 20, "", "", "", "")
        vectors = embedder.embed_documents([c.embed_text for c in chunks])
        writer.replace_documents([DocumentWrite(record, chunks, vectors)])

    def check() -> None:
        ids = [f"{d}/{n}" for d in DOCS for n in range(2)]
        got, want = mirrored.chunks_with_vectors(ids), writer.chunks_with_vectors(ids)
        assert {i: c for i, (c, _) in got.items()} == {i: c for i, (c, _) in want.items()}
        assert got

    for doc_id in ("volcano", "river", "ocean", "soil"):
        put(doc_id)
    check()
    snap = mirrored._mirror._snapshot if mirrored._mirror is not None else None
    put("river", title="Rivers, rewritten")  # each step a refresh on the old snapshot
    check()
    put("glacier")
    check()
    writer.delete_document("volcano")
    check()
    now = mirrored._mirror._snapshot if mirrored._mirror is not None else None
    assert snap is not None and now is not None and now.version > snap.version
    assert mirrored.chunks_with_vectors(["river/0"])["river/0"][0].title == "Rivers, rewritten"
    assert mirrored.chunks_with_vectors(["volcano/0"]) == {}
    mirrored.close()
    writer.close()


def vars_of(chunk: Chunk) -> dict[str, Any]:
    return {f.name: getattr(chunk, f.name) for f in fields(chunk) if f.name != "id"}
