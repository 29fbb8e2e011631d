"""GraphStore specifics on a real FalkorDB server: seed 001's graph shape, the
indexes, one-query graph expansion against the generic lookup, and the refusal
of a server that keeps no append-only file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.retrieve.expand import expand_graph, related_by_index
from ragline.store.base import DocumentWrite, StoreError
from ragline.store.graph import GraphStore
from ragline.types import Chunk, DocumentRecord, Hit

DIM = 8
SECTIONS = ["Intro", "Loss", "Loss", "Loss", "Other", "Loss", "Summary", "Summary"]


def chunk(tenant: str, doc: str, i: int, section: str) -> Chunk:
    text = f"part {i} of {doc} about {section.lower()} functions"
    return Chunk(
        id=f"{tenant}/{doc}/{i}", doc_id=doc, tenant=tenant, source=f"{doc}.md", title="Notes",
        chapter="c", section=section, heading_path=("Notes", section), url="", anchor="",
        chunk_index=i, start_char=0, end_char=len(text), token_count=8, word_count=7,
        has_code=False, has_equations=False, content_hash=f"h-{doc}-{i}",
        created_at="2024-01-01T00:00:00Z", text=text,
    )  # fmt: skip


def put(store: GraphStore, tenant: str, doc: str) -> list[Chunk]:
    chunks = [chunk(tenant, doc, i, s) for i, s in enumerate(SECTIONS)]
    rec = DocumentRecord(doc, tenant, f"{doc}.md", "f", len(chunks), 64, "c", "Notes", "md", "x")
    vecs = np.random.default_rng(len(doc)).standard_normal((len(chunks), DIM)).astype(np.float32)
    store.replace_documents([DocumentWrite(rec, chunks, vecs)])
    return chunks


def count(store: GraphStore, query: str) -> int:
    return int(store._query("test", query)[0][0])


def test_graph_has_seed_001_nodes_relationships_and_indexes(falkordb_url: str) -> None:
    store = GraphStore(falkordb_url, dimension=DIM, graph="shape")
    put(store, "acme", "a")
    put(store, "acme", "b")
    put(store, "zeta", "c")
    put(store, "acme", "a")  # a replace rebuilds a's links, never duplicates them
    n = len(SECTIONS)
    assert count(store, "MATCH (:Chunk)-[:NEXT_CHUNK]->(:Chunk) RETURN count(*)") == 3 * (n - 1)
    assert count(store, "MATCH (:Chunk)-[:BELONGS_TO]->(:Document) RETURN count(*)") == 3 * n
    assert count(store, "MATCH (:Document)-[:BELONGS_TO]->(:Project) RETURN count(*)") == 3
    assert count(store, "MATCH (p:Project) RETURN count(p)") == 2
    nxt = store._query(
        "test",
        "MATCH (a:Chunk {doc_id: 'a'})-[:NEXT_CHUNK]->(b:Chunk) "
        "RETURN a.chunk_index, b.chunk_index ORDER BY a.chunk_index",
    )
    assert nxt == [[i, i + 1] for i in range(n - 1)]
    indexes = store._query("test", "CALL db.indexes() YIELD label, types RETURN label, types")
    chunk_types = {f: t for label, types in indexes if label == "Chunk" for f, t in types.items()}
    assert "VECTOR" in chunk_types["embedding"]
    assert {"title", "headings", "text"} <= {f for f, t in chunk_types.items() if "FULLTEXT" in t}
    store.delete_document("a")
    assert count(store, "MATCH (c:Chunk) RETURN count(c)") == 2 * n
    assert count(store, "MATCH (d:Document) RETURN count(d)") == 2
    store.close()


@pytest.mark.parametrize(("window", "section"), [(1, False), (2, False), (0, True), (1, True)])
def test_one_query_expansion_equals_the_generic_lookup(
    falkordb_url: str, window: int, section: bool
) -> None:
    store = GraphStore(falkordb_url, dimension=DIM, graph=f"expand_{window}_{int(section)}")
    a = put(store, "acme", "a")
    b = put(store, "acme", "b")
    hits = [Hit(chunk=a[2], score=1.0, rank=1), Hit(chunk=b[6], score=0.9, rank=2)]
    hits.append(Hit(chunk=a[5], score=0.8, rank=3))
    ids = [h.chunk.id for h in hits]
    graph = store.related_chunks(ids, window, section, 4)
    generic = related_by_index(
        hits, store.chunks_by_index, window=window, same_section=section, span=4
    )
    for budget in (0, 16, 40, 1000):
        kw: dict[str, Any] = {"window": window, "same_section": section, "token_budget": budget}
        got = [(h.chunk.id, h.expanded_from) for h in expand_graph(hits, graph, **kw)]
        want = [(h.chunk.id, h.expanded_from) for h in expand_graph(hits, generic, **kw)]
        assert got == want, budget
    if section:
        full = expand_graph(hits, graph, window=window, same_section=True, token_budget=1000)
        assert {"acme/a/1", "acme/a/3", "acme/b/7"} <= {h.chunk.id for h in full}
    store.close()


def _servers() -> Any:
    name = "ragline_test_servers"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "servers.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_a_server_without_an_append_only_file_is_refused(tmp_path: Path) -> None:
    server = _servers().start_falkordb(tmp_path / "no-aof", appendonly=False)
    try:
        with pytest.raises(StoreError, match="appendonly yes"):
            GraphStore(server.url(), dimension=DIM, graph="kg")
    finally:
        server.stop()


def test_a_foreign_graph_of_the_same_name_is_left_alone(falkordb_url: str) -> None:
    from falkordb import FalkorDB

    host, port = falkordb_url.split("://", 1)[1].split(":")
    foreign = FalkorDB(host=host, port=int(port)).select_graph("theirs")
    foreign.query("CREATE (:Person {name: 'Ada'})")
    with pytest.raises(StoreError, match="holds no ragline store"):
        GraphStore(falkordb_url, dimension=DIM, graph="theirs")
    assert foreign.query("MATCH (p:Person) RETURN p.name").result_set == [["Ada"]]
