"""What both BM25 scorers share: the query they take, and the store's choice
between them (every scorer gives the exhaustive top-k through the store)."""

from __future__ import annotations

from types import ModuleType

import pytest

from ragline.store.postgres import PostgresStore
from ragline.store.postgres.bm25_query import KeywordQuery
from ragline.store.reads import keyword_candidates
from ragline.types import FieldBoosts


def test_a_query_prunes_only_where_pruning_is_exact() -> None:
    """Pruning needs every contribution ≥ 0: a negative boost scores every posting."""
    counts = {"zeta": 1, "alpha": 2}
    assert KeywordQuery(counts, 5, "", FieldBoosts()).terms == ["alpha", "zeta"]
    assert KeywordQuery(counts, 5, "", FieldBoosts(title=0.0)).pruned
    assert not KeywordQuery(counts, 5, "", FieldBoosts(), prune=False).pruned
    assert not KeywordQuery(counts, 5, "", FieldBoosts(headings=-0.5)).pruned


def test_store_scorers_agree(corpus: tuple[str, str], gen: ModuleType) -> None:
    url, schema = corpus
    dim = gen.DIM
    with (
        PostgresStore(url, dimension=dim, schema=schema) as client,
        PostgresStore(url, dimension=dim, schema=schema, bm25_scorer="sql") as pruned,
        PostgresStore(
            url, dimension=dim, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        assert client.bm25_scorer == "numpy"  # the default
        for query in gen.queries()[:10]:
            for filters in gen.FILTERS:
                want = keyword_candidates(exact, query, 20, filters)
                assert want, (query, filters)
                assert keyword_candidates(pruned, query, 20, filters) == want
                assert keyword_candidates(client, query, 20, filters) == want


def test_unknown_scorer_is_refused(corpus: tuple[str, str], gen: ModuleType) -> None:
    url, schema = corpus
    with pytest.raises(ValueError, match="bm25_scorer"):
        PostgresStore(url, dimension=gen.DIM, schema=schema, bm25_scorer="gpu")
