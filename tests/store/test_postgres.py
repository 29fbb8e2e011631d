"""PostgresStore behaviour beyond the contract suite, on a real PostgreSQL 18 + pgvector:
migrations, read routing to a streaming replica, retries on connection loss,
statement timeouts, the HNSW index, and a server stopped in the middle of an ingest.

Fault injection (stopping the server) uses a server of its own, so the session's
server (contract suite) is never disturbed.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from ragline.embed.base import Embedder, ModelFingerprint
from ragline.engine import Ragline
from ragline.ingest.progress import IngestProgress
from ragline.settings import Settings
from ragline.store.base import DocumentWrite, StoreError
from ragline.store.postgres import (
    MIGRATIONS_TABLE,
    PostgresStore,
    apply_migrations,
    load_migrations,
)
from ragline.store.reads import keyword_search, vector_search, vectors_for
from ragline.types import Chunk, DocumentRecord

DIM = 8
FP = ModelFingerprint(name="pg-test", dimension=DIM, digest="a" * 64)
_names = count()


def schema_name() -> str:
    return f"t_pg_{next(_names)}_{time.monotonic_ns() % 10**8}"


def chunk(doc: str, i: int, text: str, tenant: str = "acme") -> Chunk:
    return Chunk(
        id=f"{tenant}/{doc}/{i}",
        doc_id=doc,
        tenant=tenant,
        source=f"docs/{doc}.md",
        title="Notes",
        chapter="basics",
        section="Intro",
        heading_path=("Notes", "Intro"),
        url=f"file:///docs/{doc}.md",
        anchor="intro",
        chunk_index=i,
        start_char=0,
        end_char=len(text),
        token_count=len(text.split()),
        word_count=len(text.split()),
        has_code=False,
        has_equations=False,
        content_hash=f"{doc}-{i}-{text}",
        created_at="2024-01-01T00:00:00Z",
        text=text,
    )


def put(store: PostgresStore, doc: str, texts: list[str], seed: int = 0) -> list[Chunk]:
    chunks = [chunk(doc, i, t) for i, t in enumerate(texts)]
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((len(chunks), DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    record = DocumentRecord(
        doc, "acme", f"docs/{doc}.md", f"h{seed}", len(chunks), 1, "basics", "Notes", "md", "now"
    )
    store.replace_documents([DocumentWrite(record, chunks, vecs)])
    return chunks


@pytest.fixture
def open_pg(pg_url: str) -> Iterator[Callable[..., PostgresStore]]:
    """Open PostgresStores on the session server, each in a fresh schema unless told."""
    opened: list[PostgresStore] = []

    def factory(url: str = pg_url, schema: str | None = None, **kw: Any) -> PostgresStore:
        store = PostgresStore(url, dimension=DIM, schema=schema or schema_name(), **kw)
        opened.append(store)
        return store

    yield factory
    for s in opened:
        s.close()


@pytest.fixture(scope="module")
def fault_server(make_pg_server: Callable[[], Any]) -> Any:
    """A PostgreSQL of its own, for tests that stop and restart the server."""
    return make_pg_server()


# ---------------------------------------------------------------- migrations


def test_migrations_are_versioned_and_idempotent(pg_url: str, open_pg: Any) -> None:
    schema = schema_name()
    first = open_pg(schema=schema)
    put(first, "a", ["gradient descent"])
    again = open_pg(schema=schema)  # opening again applies nothing and keeps the data
    assert again.info().chunks == 1
    versions = [m.version for m in load_migrations()]
    assert versions == sorted(set(versions)) and versions[0] == 1
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT version, name FROM {schema}.{MIGRATIONS_TABLE} ORDER BY version"
        ).fetchall()
        assert [v for v, _ in rows] == versions
        assert apply_migrations(conn, schema) == []
        # a database migrated by a newer ragline is refused, not guessed at
        conn.execute(f"INSERT INTO {schema}.{MIGRATIONS_TABLE} VALUES (9999, 'future', now())")
    with pytest.raises(StoreError, match="newer than this ragline"):
        open_pg(schema=schema)


def test_processes_opening_a_new_schema_together_do_not_race(open_pg: Any) -> None:
    schema = schema_name()
    errors: list[BaseException] = []
    stores: list[PostgresStore] = []

    def open_one() -> None:
        try:
            stores.append(open_pg(schema=schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    put(stores[0], "a", ["attention layers"])
    assert [s.info().chunks for s in stores] == [1, 1, 1, 1]


def test_a_bad_schema_name_is_refused(pg_url: str) -> None:
    with pytest.raises(ValueError, match="schema"):
        PostgresStore(pg_url, dimension=DIM, schema="Robert'); DROP TABLE x;--")


# ------------------------------------------------------------------- search


def test_hnsw_index_is_built_by_optimize_and_searches_stay_right(open_pg: Any) -> None:
    store = open_pg(ann_min_rows=40, ef_search=64)
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((60, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    chunks = [chunk("big", i, f"passage number {i}") for i in range(60)]
    record = DocumentRecord("big", "acme", "docs/big.md", "h", 60, 60, "basics", "Notes", "md", "n")
    store.replace_documents([DocumentWrite(record, chunks, vecs)])
    assert not store.has_vector_index()
    store.optimize()
    assert store.has_vector_index()
    q = vecs[17]
    hits = vector_search(store, q, 5, {"tenant": "acme"})
    assert hits[0].chunk.id == "acme/big/17"
    assert hits[0].vector_score == pytest.approx(1.0, abs=1e-5)
    exact = np.argsort(-(vecs @ q))[:5]
    assert {h.chunk.id for h in hits} == {f"acme/big/{i}" for i in exact}


# ----------------------------------------------------------- read replica


def test_search_reads_go_to_the_replica(pg_server: Any, open_pg: Any) -> None:
    replica = pg_server.start_replica()
    try:
        schema = schema_name()
        store = open_pg(schema=schema, read_url=replica.url())
        put(store, "a", ["gradient descent updates weights"], seed=1)
        pg_server.wait_replayed(replica)
        assert [h.chunk.id for h in keyword_search(store, "gradient", 5)] == ["acme/a/0"]

        # Freeze the replica: a new write is on the primary only.
        replica.psql("SELECT pg_wal_replay_pause()")
        chunks = put(store, "b", ["gradient clipping bounds the gradient norm"], seed=2)
        assert store.info().chunks == 2  # counts read the primary (writes depend on them)
        assert [h.chunk.id for h in keyword_search(store, "clipping", 5)] == []
        rng = np.random.default_rng(2)
        qv = rng.standard_normal((1, DIM)).astype(np.float32)[0]
        assert chunks[0].id not in {h.chunk.id for h in vector_search(store, qv, 5)}
        assert vectors_for(store, [chunks[0].id]) == {}
        assert store.chunks_by_index("b", [0]) == []

        replica.psql("SELECT pg_wal_replay_resume()")
        pg_server.wait_replayed(replica)
        assert [h.chunk.id for h in keyword_search(store, "clipping", 5)] == ["acme/b/0"]
        assert [c.id for c in store.chunks_by_index("b", [0])] == ["acme/b/0"]
        # and the replica really is a standby
        assert replica.psql("SELECT pg_is_in_recovery()") == "t"
    finally:
        replica.destroy()


# --------------------------------------------------- connection loss, timeouts


def test_a_lost_connection_is_retried_with_backoff(fault_server: Any) -> None:
    store = PostgresStore(
        fault_server.url(),
        dimension=DIM,
        schema=schema_name(),
        max_retries=8,
        retry_base_s=0.2,
        connect_timeout_s=1,
    )
    try:
        put(store, "a", ["dropout zeroes activations"])
        fault_server.stop("immediate")
        restart = threading.Timer(1.0, fault_server.start)
        restart.start()
        try:
            t0 = time.monotonic()
            hits = keyword_search(store, "dropout", 5)  # fails, backs off, succeeds
            waited = time.monotonic() - t0
        finally:
            restart.join()
        assert [h.chunk.id for h in hits] == ["acme/a/0"]
        assert waited >= 0.5  # it did wait for the restart
        # a write is retried whole, too
        fault_server.stop("fast")
        restart = threading.Timer(1.0, fault_server.start)
        restart.start()
        try:
            put(store, "b", ["batch norm"], seed=3)
        finally:
            restart.join()
        assert store.info().chunks == 2
    finally:
        store.close()
        if not fault_server.running():
            fault_server.start()


def test_a_server_that_stays_down_fails_clearly(fault_server: Any) -> None:
    store = PostgresStore(
        fault_server.url(),
        dimension=DIM,
        schema=schema_name(),
        max_retries=1,
        retry_base_s=0.05,
        connect_timeout_s=1,
    )
    try:
        fault_server.stop("fast")
        with pytest.raises(StoreError) as info:
            store.info()
        message = str(info.value)
        assert f"127.0.0.1:{fault_server.port}" in message
        assert "connection lost while counting chunks" in message
        assert "gave up after 2 attempts" in message
    finally:
        store.close()
        fault_server.start()
    with pytest.raises(StoreError, match="cannot connect"):
        PostgresStore(
            f"postgresql://postgres@127.0.0.1:{fault_server.port + 1}/postgres",
            dimension=DIM,
            max_retries=0,
            connect_timeout_s=1,
        )


def test_statement_timeout_cancels_a_slow_query(open_pg: Any) -> None:
    store = open_pg(statement_timeout_s=0.2)
    with pytest.raises(StoreError, match="statement timeout"):
        store._run(lambda conn: conn.execute("SELECT pg_sleep(2)"), "sleeping")
    assert store.info().chunks == 0  # the pool is fine afterwards


# ------------------------------------------------- server stopped mid-ingest


def _snapshot(store: PostgresStore) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]]]:
    chunks = sorted(
        (c.id, c.content_hash, c.chunk_index) for batch, _ in store.iter_chunks() for c in batch
    )
    docs = sorted((d.source, d.file_hash) for d in store.documents())
    return chunks, docs


@pytest.mark.slow
def test_server_stopped_mid_ingest_then_next_run_completes_exactly(
    fault_server: Any, embedder: Embedder, tides: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in sorted(tides.glob("*.md"))[:6]:
        shutil.copy(path, corpus / path.name)
    files = 6
    settings = Settings(index_dir=tmp_path / "idx", write_batch_chunks=6)
    pg = {"max_retries": 2, "retry_base_s": 0.05, "connect_timeout_s": 1}

    def store(schema: str) -> PostgresStore:
        return PostgresStore(fault_server.url(), dimension=384, schema=schema, **pg)

    # A clean ingest, for reference.
    clean = store(schema_name())
    Ragline(settings, embedder=embedder, store=clean).ingest(corpus)
    expected = _snapshot(clean)
    assert len(expected[1]) == files

    schema = schema_name()
    crashed = store(schema)
    handled: list[str] = []

    def stop_after_four(event: IngestProgress) -> None:
        if event.files_done > len(handled):  # one event per handled file
            handled.append(event.current)
            if len(handled) == 4:
                fault_server.stop("immediate")

    try:
        with pytest.raises(StoreError) as info:
            Ragline(settings, embedder=embedder, store=crashed).ingest(
                corpus, progress=stop_after_four
            )
        message = str(info.value)
        # A write batch that still fails after its retries is reported and the run goes
        # on (issue 28); the run then stops at the next store call, naming the server.
        assert "PostgreSQL 127.0.0.1" in message and "connection lost while" in message
    finally:
        crashed.close()
        fault_server.start()
    partial = store(schema)
    assert 0 < len(partial.documents()) < files  # some batches were committed before the stop
    report = Ragline(settings, embedder=embedder, store=partial).ingest(corpus)
    assert not report.failed
    assert _snapshot(partial) == expected
    # the BM25 statistics are exact again: same scores as the clean index
    for query in ("install the tidekit package", "harmonic constituents", "storm surge warning"):
        got = [
            (h.chunk.id, round(h.keyword_score or 0, 6)) for h in keyword_search(partial, query, 10)
        ]
        want = [
            (h.chunk.id, round(h.keyword_score or 0, 6)) for h in keyword_search(clean, query, 10)
        ]
        assert got == want, query
    partial.close()
    clean.close()


@pytest.mark.parametrize("scorer", ["numpy", "sql"])
def test_a_percent_sign_in_a_filter_value_is_not_a_placeholder(open_pg: Any, scorer: str) -> None:
    """Filter values reach the SQL as escaped literals next to psycopg's ``%(q)s``
    parameters: a ``%`` in one (``docs/100%-sure.md``) must stay a character, not
    start a placeholder that fails the query."""
    store = open_pg(bm25_scorer=scorer)
    put(store, "100%-sure", ["spring tides follow the new moon"], seed=1)
    put(store, "other", ["spring tides follow the full moon"], seed=2)
    only = {"source": "docs/100%-sure.md"}
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    assert [h.chunk.doc_id for h in vector_search(store, query, 5, only)] == ["100%-sure"]
    assert [h.chunk.doc_id for h in keyword_search(store, "spring tides", 5, only)] == ["100%-sure"]
    assert store.info(only).chunks == 1
    assert store.info({"source": {"$in": ["docs/100%-sure.md", "docs/other.md"]}}).chunks == 2
