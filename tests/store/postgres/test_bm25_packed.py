"""The numpy scorer over packed postings returns exactly the exhaustive top-k:
with and without MaxScore over the parts, with ties, filters, chunks written
or deleted after the packing, and after migration 0004.

Real PostgreSQL (session server); the reference is the exhaustive SQL
statement run in the same snapshot; ids, order and scores must be identical
(equality of floats, not closeness).
"""

from __future__ import annotations

import dataclasses
import time
from types import ModuleType

import numpy as np
import psycopg
import pytest

from ragline.embed.base import ModelFingerprint
from ragline.store.base import DocumentWrite
from ragline.store.postgres import PostgresStore, bm25_packed
from ragline.store.postgres.bm25_formula import Formula
from ragline.store.postgres.bm25_query import KeywordQuery
from ragline.store.reads import keyword_candidates
from ragline.text import bm25
from ragline.types import DocumentRecord, FieldBoosts


@pytest.mark.parametrize("k", [1, 10, 60])
@pytest.mark.parametrize("boosts", [FieldBoosts(), FieldBoosts(title=1.3, headings=0.7, text=1.1)])
def test_client_scorer_is_the_exhaustive_top_k(
    corpus: tuple[str, str], gen: ModuleType, k: int, boosts: FieldBoosts
) -> None:
    url, schema = corpus
    formula = Formula(bm25.K1, bm25.B)
    with gen.connect(url, schema) as conn:
        for query, counts, filters, pred in gen.cases(gen.queries()):
            with gen.snapshot(conn):
                exact = gen.exhaustive(conn, counts, k, pred, boosts)
                q = KeywordQuery(counts, k, pred, boosts)
                client = bm25_packed.client_top_k(conn, q, formula)
            assert client == exact, (query, filters)
            assert len(exact) == k or filters, query  # the comparison is not of empties


def test_packed_lists_with_later_writes_and_deletes(pg_url: str, gen: ModuleType) -> None:
    """Chunks written after the packing (read from rows) and chunks deleted since
    (still in the packed lists) give the exhaustive top-k; optimize() repacks
    once enough changed, and not before."""
    schema = f"t_packed_{time.monotonic_ns() % 10**9}"
    rng = np.random.default_rng(3)

    def doc(d: int, salt: int) -> DocumentWrite:
        tenant = "acme" if d % 3 else "beta"
        chunks = [gen.make_chunk(rng, d, i + salt, tenant) for i in range(gen.PER_DOC)]
        record = DocumentRecord(
            f"d{d}", tenant, f"docs/d{d}.md", f"h{salt}", len(chunks), 1, "", "", "md", "now"
        )
        return DocumentWrite(
            record, chunks, rng.standard_normal((len(chunks), gen.DIM), dtype=np.float32)
        )

    with (
        PostgresStore(pg_url, dimension=gen.DIM, schema=schema, bm25_repack_fraction=0.2) as store,
        PostgresStore(
            pg_url, dimension=gen.DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        store.fingerprint(ModelFingerprint(name="bm25-test", dimension=gen.DIM, digest="b" * 64))
        store.replace_documents([doc(d, 0) for d in range(20)])
        assert gen.packed_meta(pg_url, schema) == (0, 0)
        store.optimize()
        terms, mark = gen.packed_meta(pg_url, schema)
        assert terms > 0 and mark > 0

        def same() -> None:
            for query in gen.queries()[:15]:
                for filters in gen.FILTERS:
                    want = keyword_candidates(exact, query, 10, filters)
                    assert keyword_candidates(store, query, 10, filters) == want, (query, filters)

        same()
        store.replace_documents([doc(d, 100) for d in (1, 2)])  # 50 newer chunks, 50 stale
        store.delete_document("d4")  # 25 more stale
        same()
        store.optimize()  # 125 changed of 475 chunks: above 20 %, repacked
        assert gen.packed_meta(pg_url, schema)[1] > mark
        mark = gen.packed_meta(pg_url, schema)[1]
        store.replace_documents([doc(5, 200)])  # 50 of 475 changed: below 20 %, kept
        store.optimize()
        assert gen.packed_meta(pg_url, schema)[1] == mark
        same()


@pytest.mark.parametrize("probe", [40, 400])
@pytest.mark.parametrize("k", [1, 10, 60])
def test_pruned_client_scorer_is_the_exhaustive_top_k(
    corpus: tuple[str, str], gen: ModuleType, probe: int, k: int
) -> None:
    url, schema = corpus
    formula = Formula(bm25.K1, bm25.B)
    pruned = compared = 0
    with gen.connect(url, schema) as conn:
        for query, counts, filters, pred in gen.cases(gen.queries()):
            for boosts in (FieldBoosts(), FieldBoosts(title=0.5, headings=0.0, text=1.7)):
                with gen.snapshot(conn):
                    want = gen.exhaustive(conn, counts, k, pred, boosts)
                    q = KeywordQuery(counts, k, pred, boosts)
                    got = bm25_packed.client_top_k(
                        conn, q, formula, probe_postings=probe, min_postings=0
                    )
                    parts, avg = bm25_packed.read_parts(conn, q, formula)
                    lookup = bm25_packed.Lookup(conn, pred)
                    kept = bm25_packed.prune_candidates(
                        parts, avg, formula, k, lookup, probe, min_postings=0
                    )
                assert got == want, (query, filters, boosts)
                compared += bool(want)
                pruned += kept.scored < kept.postings
    assert compared >= len(gen.queries()) * len(gen.FILTERS)  # not a comparison of empties
    # The comparison means something only if parts were set aside often.
    assert pruned >= compared // 4, (pruned, compared)


def tied_corpus(gen: ModuleType, url: str, seed: int) -> tuple[str, list[str]]:
    """Chunks with repeated texts (tied scores) over two tenants, packed, then
    some rewritten and deleted after the packing; returns (schema, queries)."""
    schema = f"t_ties_{seed}_{time.monotonic_ns() % 10**9}"
    rng = np.random.default_rng(seed)
    texts = [gen.make_chunk(rng, 0, i, "x") for i in range(40)]

    def doc(d: int, salt: int) -> DocumentWrite:
        tenant = "acme" if d % 2 else "beta"
        chunks = []
        for i in range(10):
            base = texts[int(rng.integers(0, len(texts)))]
            chunks.append(
                dataclasses.replace(
                    base,
                    id=f"{tenant}/d{d}/{i}",
                    doc_id=f"d{d}",
                    tenant=tenant,
                    source=f"docs/d{d}.md",
                    chunk_index=i,
                    has_code=(d + i + salt) % 3 == 0,
                    content_hash=f"d{d}-{i}-{salt}",
                )
            )
        record = DocumentRecord(
            f"d{d}", tenant, f"docs/d{d}.md", f"h{salt}", len(chunks), 1, "", "", "md", "now"
        )
        return DocumentWrite(
            record, chunks, rng.standard_normal((len(chunks), gen.DIM), dtype=np.float32)
        )

    with PostgresStore(url, dimension=gen.DIM, schema=schema) as store:
        store.fingerprint(ModelFingerprint(name="bm25-test", dimension=gen.DIM, digest="b" * 64))
        store.replace_documents([doc(d, 0) for d in range(30)])
        store.optimize()
        store.replace_documents([doc(d, 1) for d in (3, 4)])  # newer rows, stale packed ones
        store.delete_document("d7")
    words = [w for t in texts for w in t.text.split()[:3]]
    qs = [
        " ".join(str(w) for w in rng.choice(words, size=int(rng.integers(1, 7)))) for _ in range(25)
    ]
    return schema, qs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruned_client_scorer_with_ties_filters_and_stale_postings(
    pg_url: str, gen: ModuleType, seed: int
) -> None:
    """Random corpora of repeated texts: many chunks tie, so the order at the cut
    (score, then key) and the filters applied before the top-k decide the result."""
    schema, qs = tied_corpus(gen, pg_url, seed)
    formula = Formula(bm25.K1, bm25.B)
    ties = 0
    with gen.connect(pg_url, schema) as conn:
        for query, counts, filters, pred in gen.cases(qs):
            for k in (1, 5, 17):
                for probe in (10, 150):
                    with gen.snapshot(conn):
                        want = gen.exhaustive(conn, counts, k, pred, FieldBoosts())
                        q = KeywordQuery(counts, k, pred, FieldBoosts())
                        got = bm25_packed.client_top_k(
                            conn, q, formula, probe_postings=probe, min_postings=0
                        )
                    assert got == want, (query, filters, k, probe)
                    scores = [s for _, s in want]
                    ties += len(scores) != len(set(scores))
                    assert not any(i.startswith("acme/d7/") for i, _ in want)  # deleted
    assert ties > 20  # the corpus does produce ties in the top-k


def test_migration_0004_upgrades_a_packed_index(pg_url: str, gen: ModuleType) -> None:
    """An index packed in the 0003 format (one list per term) is upgraded by
    migration 0004 without losing a chunk: searches read the rows (exact) until
    optimize() packs the postings again, in parts."""
    schema = f"t_mig4_{time.monotonic_ns() % 10**9}"
    rng = np.random.default_rng(9)
    with PostgresStore(pg_url, dimension=gen.DIM, schema=schema) as store:
        store.fingerprint(ModelFingerprint(name="bm25-test", dimension=gen.DIM, digest="b" * 64))
        chunks = [gen.make_chunk(rng, 0, i, "acme") for i in range(120)]
        record = DocumentRecord("d0", "acme", "docs/d0.md", "h", 120, 1, "", "", "md", "now")
        store.replace_documents(
            [DocumentWrite(record, chunks, rng.standard_normal((120, gen.DIM), dtype=np.float32))]
        )
        store.optimize()
        before = store.info().chunks
    with gen.connect(pg_url, schema) as conn:  # back to version 3, packed
        conn.execute("DELETE FROM ragline_schema_migrations WHERE version = 4")
        conn.execute("DROP TABLE ragline_term_postings")
        conn.execute(
            "CREATE TABLE ragline_term_postings (term text PRIMARY KEY, postings bytea NOT NULL)"
        )
        conn.execute(
            f"INSERT INTO ragline_term_postings SELECT p.term, {bm25_packed._PACK} "
            "FROM ragline_postings p GROUP BY p.term"
        )
        assert gen.packed_meta(pg_url, schema)[1] > 0
    with (
        PostgresStore(pg_url, dimension=gen.DIM, schema=schema) as store,
        PostgresStore(
            pg_url, dimension=gen.DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        assert store.info().chunks == before
        assert gen.packed_meta(pg_url, schema) == (0, 0)  # read from rows until optimize()
        with (
            gen.connect(pg_url, schema) as conn,
            pytest.raises(psycopg.errors.NotNullViolation),
        ):  # a process still packing in the 0003 format cannot write boundless parts
            conn.execute(
                f"INSERT INTO ragline_term_postings (term, postings) SELECT p.term, "
                f"{bm25_packed._PACK} FROM ragline_postings p GROUP BY p.term"
            )
        want = {q: keyword_candidates(exact, q, 10) for q in gen.queries()[:12]}
        assert all(want.values())
        assert {q: keyword_candidates(store, q, 10) for q in want} == want
        store.optimize()
        terms, mark = gen.packed_meta(pg_url, schema)
        assert terms > 0 and mark > 0
        assert {q: keyword_candidates(store, q, 10) for q in want} == want


def test_the_pruning_settings_reach_the_store(pg_url: str, gen: ModuleType) -> None:
    """RAGLINE_PG_BM25_PROBE_POSTINGS / _PRUNE_MIN_POSTINGS are what the numpy scorer
    gets (a setting the factory dropped would silently keep the module default)."""
    from ragline.settings import Settings
    from ragline.store.factory import make_store

    sep = "&" if "?" in pg_url else "?"
    url = f"{pg_url}{sep}schema=t_bm25_settings_{time.monotonic_ns() % 10**9}"
    settings = Settings(
        store_url=url, pg_bm25_probe_postings=1_234, pg_bm25_prune_min_postings=56_789
    )
    with make_store(settings, gen.DIM) as store:
        assert isinstance(store, PostgresStore)
        assert store.bm25_numpy_probe_postings == 1_234
        assert store.bm25_numpy_prune_min_postings == 56_789
