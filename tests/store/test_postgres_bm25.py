"""PostgreSQL BM25 scorers (numpy, MaxScore-pruned SQL) return exactly the exhaustive top-k.

Real PostgreSQL (session server), generated chunks whose terms follow a Zipf
law (a few terms in most chunks, a long tail of rare ones), two tenants and a
boolean column, so filters remove some of the best chunks. Every query is
scored both ways in one snapshot; ids, order and scores must be identical
(equality of floats, not closeness).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

from ragline.embed.base import ModelFingerprint
from ragline.store.base import DocumentWrite
from ragline.store.filters import to_sql_predicate
from ragline.store.postgres import PostgresStore
from ragline.store.postgres import bm25 as postgres_bm25
from ragline.store.reads import keyword_candidates
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, FieldBoosts

DIM = 4
VOCAB = 400
DOCS, PER_DOC = 60, 25  # 1,500 chunks


def word(rank: int) -> str:
    return f"zq{rank}x"


def make_chunk(rng: np.random.Generator, doc: int, i: int, tenant: str) -> Chunk:
    zipf = np.minimum(rng.zipf(1.3, size=int(rng.integers(5, 80))), VOCAB) - 1
    text = " ".join(word(int(r)) for r in zipf)
    title = " ".join(word(int(r)) for r in rng.integers(0, VOCAB, size=int(rng.integers(0, 4))))
    return Chunk(
        id=f"{tenant}/d{doc}/{i}",
        doc_id=f"d{doc}",
        tenant=tenant,
        source=f"docs/d{doc}.md",
        title=title,
        chapter="",
        section=word(int(rng.integers(0, 20))),
        heading_path=(title, word(int(rng.integers(0, 20)))),
        url="",
        anchor="",
        chunk_index=i,
        start_char=0,
        end_char=len(text),
        token_count=len(text.split()),
        word_count=len(text.split()),
        has_code=bool(rng.random() < 0.3),
        has_equations=False,
        content_hash=f"d{doc}-{i}",
        created_at="2024-01-01T00:00:00Z",
        text=text,
    )


@pytest.fixture(scope="module")
def corpus(pg_url: str) -> Iterator[tuple[str, str]]:
    schema = f"t_bm25_{time.monotonic_ns() % 10**9}"
    store = PostgresStore(pg_url, dimension=DIM, schema=schema)
    store.fingerprint(ModelFingerprint(name="bm25-test", dimension=DIM, digest="b" * 64))
    rng = np.random.default_rng(7)
    writes = []
    for d in range(DOCS):
        tenant = "acme" if d % 3 else "beta"
        chunks = [make_chunk(rng, d, i, tenant) for i in range(PER_DOC)]
        vecs = rng.standard_normal((len(chunks), DIM)).astype(np.float32)
        record = DocumentRecord(
            f"d{d}", tenant, f"docs/d{d}.md", "h", len(chunks), 1, "", "", "md", "now"
        )
        writes.append(DocumentWrite(record, chunks, vecs))
    store.replace_documents(writes)
    store.replace_documents(writes[:3])  # rewritten documents: statistics adjusted, not rebuilt
    store.optimize()
    store.close()
    yield pg_url, schema


def queries() -> list[str]:
    rng = np.random.default_rng(11)
    out = [
        f"{word(0)} {word(1)} {word(2)} {word(150)}",  # three very common terms and a rare one
        f"{word(0)} {word(0)} {word(3)} {word(40)} {word(41)} {word(300)}",
        f"{word(5)} {word(17)}",
        f"{word(1)} nosuchterm",
    ]
    for _ in range(40):
        ranks = np.minimum(rng.zipf(1.2, size=int(rng.integers(2, 9))), VOCAB) - 1
        out.append(" ".join(word(int(r)) for r in ranks))
    return out


FILTERS: list[dict[str, Any] | None] = [
    None,
    {"tenant": "acme"},
    {"tenant": "beta", "has_code": True},
]


@pytest.mark.parametrize("probe", [30, 300, postgres_bm25.PROBE_POSTINGS])
@pytest.mark.parametrize("k", [1, 10, 60])
def test_pruned_top_k_is_the_exhaustive_top_k(corpus: tuple[str, str], probe: int, k: int) -> None:
    url, schema = corpus
    boosts, pruned_runs = FieldBoosts(), 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        for query in queries():
            counts = bm25.query_counts(query)
            for filters in FILTERS:
                pred = to_sql_predicate(filters)
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    args = (conn, counts, k, pred, boosts, bm25.K1, bm25.B)
                    exact = postgres_bm25.top_k(*args, prune=False)
                    plan = postgres_bm25.plan(*args, probe_postings=probe)
                    pruned = postgres_bm25.top_k(*args, probe_postings=probe, snapshot=False)
                pruned_runs += plan is not None
                assert pruned == exact, (query, filters)
                if filters:  # the filter held: ids begin with their tenant
                    assert all(i.startswith(f"{filters['tenant']}/") for i, _ in exact)
    # The comparison means something only if the pruned statement ran often.
    assert pruned_runs >= len(queries()) * len(FILTERS) // 4, pruned_runs


def test_pruning_skips_the_common_terms(corpus: tuple[str, str]) -> None:
    url, schema = corpus
    counts = bm25.query_counts(f"{word(0)} {word(1)} {word(150)} {word(220)}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        plan = postgres_bm25.plan(conn, counts, 5, "", FieldBoosts(), bm25.K1, bm25.B, 30)
    assert plan is not None
    assert word(0) not in plan["full"]  # the most common term's full list is not read
    assert word(220) in plan["full"]  # the rarest (highest text bound) is read whole


def test_split_demotes_the_terms_that_cannot_reach_theta() -> None:
    stats = {"a": (1, 1, 3), "b": (2, 0, 900), "c": (0, 5, 500)}
    bounds = postgres_bm25.term_bounds(
        Counter({"a": 1, "b": 1, "c": 1}), stats, (1000, 1000, 1000), FieldBoosts(), bm25.K1
    )
    by = {tb.term: tb for tb in bounds}
    assert [tb.term for tb in bounds] == ["a", "c", "b"]  # shortest list first
    # θ just above b's text bound: only b's text part may go unread.
    split = postgres_bm25.split_terms(bounds, by["b"].bounds[2] * 1.01)
    assert (split.full, split.th, split.none) == (["a", "c"], ["b"], [])
    assert split.rest == (0.0, 0.0, by["b"].bounds[2])
    # θ above the sum of all bounds: no list needs reading.
    big = postgres_bm25.split_terms(bounds, 1e9)
    assert big.full == [] and sorted(big.none) == ["a", "b", "c"]
    assert postgres_bm25.split_terms(bounds, by["b"].bounds[2] * 0.99).full == ["a", "c", "b"]


def test_store_scorers_agree(corpus: tuple[str, str]) -> None:
    url, schema = corpus
    with (
        PostgresStore(url, dimension=DIM, schema=schema) as client,
        PostgresStore(url, dimension=DIM, schema=schema, bm25_scorer="sql") as pruned,
        PostgresStore(
            url, dimension=DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        assert client.bm25_scorer == "numpy"  # the default
        for query in queries()[:10]:
            for filters in FILTERS:
                want = keyword_candidates(exact, query, 20, filters)
                assert want, (query, filters)
                assert keyword_candidates(pruned, query, 20, filters) == want
                assert keyword_candidates(client, query, 20, filters) == want


def test_unknown_scorer_is_refused(corpus: tuple[str, str]) -> None:
    url, schema = corpus
    with pytest.raises(ValueError, match="bm25_scorer"):
        PostgresStore(url, dimension=DIM, schema=schema, bm25_scorer="gpu")


@pytest.mark.parametrize("k", [1, 10, 60])
@pytest.mark.parametrize("boosts", [FieldBoosts(), FieldBoosts(title=1.3, headings=0.7, text=1.1)])
def test_client_scorer_is_the_exhaustive_top_k(
    corpus: tuple[str, str], k: int, boosts: FieldBoosts
) -> None:
    url, schema = corpus
    formula = postgres_bm25.Formula(bm25.K1, bm25.B)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        for query in queries():
            counts = bm25.query_counts(query)
            for filters in FILTERS:
                pred = to_sql_predicate(filters)
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    args = (conn, counts, k, pred, boosts)
                    exact = postgres_bm25.top_k(*args, bm25.K1, bm25.B, prune=False)
                    client = postgres_bm25.client_top_k(*args, formula)
                assert client == exact, (query, filters)
                assert len(exact) == k or filters, query  # the comparison is not of empties


def packed_meta(url: str, schema: str) -> tuple[int, int]:
    """(packed terms, watermark) of a schema."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ragline_term_postings), "
            "coalesce((SELECT (value->>'watermark')::bigint FROM ragline_meta "
            "WHERE key = 'packed_postings'), 0)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_packed_lists_with_later_writes_and_deletes(pg_url: str) -> None:
    """Chunks written after the packing (read from rows) and chunks deleted since
    (still in the packed lists) give the exhaustive top-k; optimize() repacks
    once enough changed, and not before."""
    schema = f"t_packed_{time.monotonic_ns() % 10**9}"
    rng = np.random.default_rng(3)

    def doc(d: int, salt: int) -> DocumentWrite:
        tenant = "acme" if d % 3 else "beta"
        chunks = [make_chunk(rng, d, i + salt, tenant) for i in range(PER_DOC)]
        record = DocumentRecord(
            f"d{d}", tenant, f"docs/d{d}.md", f"h{salt}", len(chunks), 1, "", "", "md", "now"
        )
        return DocumentWrite(
            record, chunks, rng.standard_normal((len(chunks), DIM), dtype=np.float32)
        )

    with (
        PostgresStore(pg_url, dimension=DIM, schema=schema, bm25_repack_fraction=0.2) as store,
        PostgresStore(
            pg_url, dimension=DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        store.fingerprint(ModelFingerprint(name="bm25-test", dimension=DIM, digest="b" * 64))
        store.replace_documents([doc(d, 0) for d in range(20)])
        assert packed_meta(pg_url, schema) == (0, 0)
        store.optimize()
        terms, mark = packed_meta(pg_url, schema)
        assert terms > 0 and mark > 0

        def same() -> None:
            for query in queries()[:15]:
                for filters in FILTERS:
                    want = keyword_candidates(exact, query, 10, filters)
                    assert keyword_candidates(store, query, 10, filters) == want, (query, filters)

        same()
        store.replace_documents([doc(d, 100) for d in (1, 2)])  # 50 newer chunks, 50 stale
        store.delete_document("d4")  # 25 more stale
        same()
        store.optimize()  # 125 changed of 475 chunks: above 20 %, repacked
        assert packed_meta(pg_url, schema)[1] > mark
        mark = packed_meta(pg_url, schema)[1]
        store.replace_documents([doc(5, 200)])  # 50 of 475 changed: below 20 %, kept
        store.optimize()
        assert packed_meta(pg_url, schema)[1] == mark
        same()


# ------------------------------------------- numpy scorer with MaxScore over parts


def test_part_bound_is_never_exceeded() -> None:
    """A part's bound (largest tf, smallest length) is ≥ the contribution of every
    posting it may hold, computed as the scorer computes it."""
    rng = np.random.default_rng(5)
    formula = postgres_bm25.Formula(bm25.K1, bm25.B)
    for _ in range(200):
        max_tf = rng.integers(0, 6, size=3)
        min_len = rng.integers(1, 80, size=3)
        avg = tuple(float(a) for a in rng.uniform(1, 60, size=3))
        w = tuple(float(x) for x in rng.uniform(0, 9, size=3))
        bound = formula.bound(w, max_tf.tolist(), min_len.tolist(), avg)  # type: ignore[arg-type]
        t1, t2 = formula.tables(8, 400)
        for f in range(3):
            if max_tf[f] == 0:
                assert bound[f] == 0
                continue
            tf = rng.integers(1, max_tf[f] + 1, size=50)
            ln = rng.integers(min_len[f], 400, size=50)
            c = (w[f] * tf) / (t1[tf] + t2[ln] / avg[f])
            assert (c <= bound[f]).all()
            assert c.max() >= bound[f] * 0.3  # not a vacuous bound


def exhaustive(
    conn: psycopg.Connection[Any], counts: Any, k: int, pred: str, boosts: FieldBoosts
) -> list[tuple[str, float]]:
    return postgres_bm25.top_k(conn, counts, k, pred, boosts, bm25.K1, bm25.B, prune=False)


@pytest.mark.parametrize("probe", [40, 400])
@pytest.mark.parametrize("k", [1, 10, 60])
def test_pruned_client_scorer_is_the_exhaustive_top_k(
    corpus: tuple[str, str], probe: int, k: int
) -> None:
    url, schema = corpus
    formula = postgres_bm25.Formula(bm25.K1, bm25.B)
    pruned = compared = 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        for query in queries():
            counts = bm25.query_counts(query)
            for filters in FILTERS:
                pred = to_sql_predicate(filters)
                for boosts in (FieldBoosts(), FieldBoosts(title=0.5, headings=0.0, text=1.7)):
                    with conn.transaction():
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                        want = exhaustive(conn, counts, k, pred, boosts)
                        got = postgres_bm25.client_top_k(
                            conn,
                            counts,
                            k,
                            pred,
                            boosts,
                            formula,
                            probe_postings=probe,
                            min_postings=0,
                        )
                        parts, avg = postgres_bm25.read_parts(conn, counts, boosts, formula)
                        lookup = postgres_bm25.Lookup(conn, pred)
                        kept = postgres_bm25.prune_candidates(
                            parts, avg, formula, k, lookup, probe, min_postings=0
                        )
                    assert got == want, (query, filters, boosts)
                    compared += bool(want)
                    pruned += kept.scored < kept.postings
    assert compared >= len(queries()) * len(FILTERS)  # not a comparison of empties
    # The comparison means something only if parts were set aside often.
    assert pruned >= compared // 4, (pruned, compared)


def tied_corpus(url: str, seed: int) -> tuple[str, list[str]]:
    """Chunks with repeated texts (tied scores) over two tenants, packed, then
    some rewritten and deleted after the packing; returns (schema, queries)."""
    schema = f"t_ties_{seed}_{time.monotonic_ns() % 10**9}"
    rng = np.random.default_rng(seed)
    texts = [make_chunk(rng, 0, i, "x") for i in range(40)]

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
            record, chunks, rng.standard_normal((len(chunks), DIM), dtype=np.float32)
        )

    with PostgresStore(url, dimension=DIM, schema=schema) as store:
        store.fingerprint(ModelFingerprint(name="bm25-test", dimension=DIM, digest="b" * 64))
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
def test_pruned_client_scorer_with_ties_filters_and_stale_postings(pg_url: str, seed: int) -> None:
    """Random corpora of repeated texts: many chunks tie, so the order at the cut
    (score, then key) and the filters applied before the top-k decide the result."""
    schema, qs = tied_corpus(pg_url, seed)
    formula = postgres_bm25.Formula(bm25.K1, bm25.B)
    ties = 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        for query in qs:
            counts = bm25.query_counts(query)
            for filters in FILTERS:
                pred = to_sql_predicate(filters)
                for k in (1, 5, 17):
                    for probe in (10, 150):
                        with conn.transaction():
                            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                            want = exhaustive(conn, counts, k, pred, FieldBoosts())
                            got = postgres_bm25.client_top_k(
                                conn,
                                counts,
                                k,
                                pred,
                                FieldBoosts(),
                                formula,
                                probe_postings=probe,
                                min_postings=0,
                            )
                        assert got == want, (query, filters, k, probe)
                        scores = [s for _, s in want]
                        ties += len(scores) != len(set(scores))
                        assert not any(i.startswith("acme/d7/") for i, _ in want)  # deleted
    assert ties > 20  # the corpus does produce ties in the top-k


def test_migration_0004_upgrades_a_packed_index(pg_url: str) -> None:
    """An index packed in the 0003 format (one list per term) is upgraded by
    migration 0004 without losing a chunk: searches read the rows (exact) until
    optimize() packs the postings again, in parts."""
    schema = f"t_mig4_{time.monotonic_ns() % 10**9}"
    rng = np.random.default_rng(9)
    with PostgresStore(pg_url, dimension=DIM, schema=schema) as store:
        store.fingerprint(ModelFingerprint(name="bm25-test", dimension=DIM, digest="b" * 64))
        chunks = [make_chunk(rng, 0, i, "acme") for i in range(120)]
        record = DocumentRecord("d0", "acme", "docs/d0.md", "h", 120, 1, "", "", "md", "now")
        store.replace_documents(
            [DocumentWrite(record, chunks, rng.standard_normal((120, DIM), dtype=np.float32))]
        )
        store.optimize()
        before = store.info().chunks
    with psycopg.connect(pg_url, autocommit=True) as conn:  # back to version 3, packed
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        conn.execute("DELETE FROM ragline_schema_migrations WHERE version = 4")
        conn.execute("DROP TABLE ragline_term_postings")
        conn.execute(
            "CREATE TABLE ragline_term_postings (term text PRIMARY KEY, postings bytea NOT NULL)"
        )
        conn.execute(
            f"INSERT INTO ragline_term_postings SELECT p.term, {postgres_bm25._PACK} "
            "FROM ragline_postings p GROUP BY p.term"
        )
        assert packed_meta(pg_url, schema)[1] > 0
    with (
        PostgresStore(pg_url, dimension=DIM, schema=schema) as store,
        PostgresStore(
            pg_url, dimension=DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        assert store.info().chunks == before
        assert packed_meta(pg_url, schema) == (0, 0)  # read from rows until optimize()
        with (
            psycopg.connect(pg_url, autocommit=True) as conn,
            pytest.raises(psycopg.errors.NotNullViolation),
        ):  # a process still packing in the 0003 format cannot write boundless parts
            conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
            conn.execute(
                f"INSERT INTO ragline_term_postings (term, postings) SELECT p.term, "
                f"{postgres_bm25._PACK} FROM ragline_postings p GROUP BY p.term"
            )
        want = {q: keyword_candidates(exact, q, 10) for q in queries()[:12]}
        assert all(want.values())
        assert {q: keyword_candidates(store, q, 10) for q in want} == want
        store.optimize()
        terms, mark = packed_meta(pg_url, schema)
        assert terms > 0 and mark > 0
        assert {q: keyword_candidates(store, q, 10) for q in want} == want


def test_the_pruning_settings_reach_the_store(pg_url: str) -> None:
    """RAGLINE_PG_BM25_PROBE_POSTINGS / _PRUNE_MIN_POSTINGS are what the numpy scorer
    gets (a setting the factory dropped would silently keep the module default)."""
    from ragline.settings import Settings
    from ragline.store.factory import make_store

    sep = "&" if "?" in pg_url else "?"
    url = f"{pg_url}{sep}schema=t_bm25_settings_{time.monotonic_ns() % 10**9}"
    settings = Settings(
        store_url=url, pg_bm25_probe_postings=1_234, pg_bm25_prune_min_postings=56_789
    )
    with make_store(settings, DIM) as store:
        assert isinstance(store, PostgresStore)
        assert store.bm25_numpy_probe_postings == 1_234
        assert store.bm25_numpy_prune_min_postings == 56_789
