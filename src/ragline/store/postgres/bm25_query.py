"""What both PostgreSQL BM25 scorers share: the query they are given, the term
statistics they read and the slack that keeps bound pruning exact.

The scorers (:mod:`.bm25_sql` in the server, :mod:`.bm25_packed` in numpy) are
separate modules and never import each other; what they have in common lives
here, below both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ragline.types import FieldBoosts

#: Where a query's BM25 is computed: "numpy" (postings read packed in one
#: statement, scored client side: :func:`~.bm25_packed.client_top_k`) or "sql"
#: (in the server: :func:`~.bm25_sql.top_k`, MaxScore-pruned unless told not to).
SCORERS = ("numpy", "sql")
#: Relative slack on bounds and threshold: float rounding never prunes a chunk
#: whose exact score reaches θ.
SLACK = 1e-9


@dataclass(frozen=True)
class KeywordQuery:
    """A BM25 top-k request as every scorer takes it: each query term's count,
    ``k``, the filters' SQL predicate (empty: none), the field boosts, and
    whether MaxScore pruning is wanted (``prune=False``: score every posting,
    the reference the tests compare with)."""

    counts: Mapping[str, int]
    k: int
    pred: str
    boosts: FieldBoosts
    prune: bool = True

    @property
    def terms(self) -> list[str]:
        """The query terms in the order the statements take them (sorted)."""
        return sorted(self.counts)

    @property
    def pruned(self) -> bool:
        """Prune: asked for, and exact (no boost is negative, so every
        contribution is ≥ 0 and a partial sum never exceeds the score)."""
        boosts = self.boosts
        return self.prune and min(boosts.title, boosts.headings, boosts.text) >= 0


def term_stats(
    conn: psycopg.Connection[Any], terms: Sequence[str]
) -> tuple[dict[str, tuple[int, int, int]], tuple[int, int, int]]:
    """Document frequency per field (title, headings, text) of each of ``terms``
    present in the index, and the chunks per field."""
    rows = conn.execute(
        "SELECT term, df_title, df_headings, df_text FROM ragline_terms WHERE term = ANY(%s)",
        (list(terms),),
    ).fetchall()
    corpus = conn.execute("SELECT n_title, n_headings, n_text FROM ragline_corpus").fetchone()
    n = (int(corpus[0]), int(corpus[1]), int(corpus[2])) if corpus else (0, 0, 0)
    return {str(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}, n
