"""The MaxScore-pruned SQL scorer returns exactly the exhaustive top-k.

Real PostgreSQL (session server) over the generated corpus (bm25_corpus.py).
Every query is scored both ways in one snapshot; ids, order and scores must be
identical (equality of floats, not closeness).
"""

from __future__ import annotations

from collections import Counter
from types import ModuleType

import pytest

from ragline.store.postgres import bm25_sql
from ragline.store.postgres.bm25_query import KeywordQuery
from ragline.text import bm25
from ragline.types import FieldBoosts


@pytest.mark.parametrize("probe", [30, 300, bm25_sql.PROBE_POSTINGS])
@pytest.mark.parametrize("k", [1, 10, 60])
def test_pruned_top_k_is_the_exhaustive_top_k(
    corpus: tuple[str, str], gen: ModuleType, probe: int, k: int
) -> None:
    url, schema = corpus
    boosts, pruned_runs = FieldBoosts(), 0
    with gen.connect(url, schema) as conn:
        for query, counts, filters, pred in gen.cases(gen.queries()):
            with gen.snapshot(conn):
                q = KeywordQuery(counts, k, pred, boosts)
                exact = gen.exhaustive(conn, counts, k, pred, boosts)
                plan = bm25_sql.plan(conn, q, bm25.K1, bm25.B, probe_postings=probe)
                pruned = bm25_sql.top_k(
                    conn, q, bm25.K1, bm25.B, probe_postings=probe, snapshot=False
                )
            pruned_runs += plan is not None
            assert pruned == exact, (query, filters)
            if filters:  # the filter held: ids begin with their tenant
                assert all(i.startswith(f"{filters['tenant']}/") for i, _ in exact)
    # The comparison means something only if the pruned statement ran often.
    assert pruned_runs >= len(gen.queries()) * len(gen.FILTERS) // 4, pruned_runs


def test_pruning_skips_the_common_terms(corpus: tuple[str, str], gen: ModuleType) -> None:
    url, schema = corpus
    word = gen.word
    counts = bm25.query_counts(f"{word(0)} {word(1)} {word(150)} {word(220)}")
    with gen.connect(url, schema) as conn:
        q = KeywordQuery(counts, 5, "", FieldBoosts())
        plan = bm25_sql.plan(conn, q, bm25.K1, bm25.B, 30)
    assert plan is not None
    assert word(0) not in plan["full"]  # the most common term's full list is not read
    assert word(220) in plan["full"]  # the rarest (highest text bound) is read whole


def test_split_demotes_the_terms_that_cannot_reach_theta() -> None:
    stats = {"a": (1, 1, 3), "b": (2, 0, 900), "c": (0, 5, 500)}
    bounds = bm25_sql.term_bounds(
        Counter({"a": 1, "b": 1, "c": 1}), stats, (1000, 1000, 1000), FieldBoosts(), bm25.K1
    )
    by = {tb.term: tb for tb in bounds}
    assert [tb.term for tb in bounds] == ["a", "c", "b"]  # shortest list first
    # θ just above b's text bound: only b's text part may go unread.
    split = bm25_sql.split_terms(bounds, by["b"].bounds[2] * 1.01)
    assert (split.full, split.th, split.none) == (["a", "c"], ["b"], [])
    assert split.rest == (0.0, 0.0, by["b"].bounds[2])
    # θ above the sum of all bounds: no list needs reading.
    big = bm25_sql.split_terms(bounds, 1e9)
    assert big.full == [] and sorted(big.none) == ["a", "b", "c"]
    assert bm25_sql.split_terms(bounds, by["b"].bounds[2] * 0.99).full == ["a", "c", "b"]
