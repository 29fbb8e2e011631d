"""BM25 top-k on PostgreSQL scored in SQL, exact: the exhaustive statement, and
MaxScore pruning in the server (``bm25_scorer="sql"``).

The exhaustive scorer (:func:`keyword_sql`) reads every posting of every query
term; common terms ("cell", "patient") have thousands per 100k chunks, which
made PostgreSQL keyword search ~10× slower than LanceDB's. It is the reference:
the other scorers return the same ids and the same float scores faster, the
default one in numpy over packed postings (:mod:`.bm25_packed`), this one,
:func:`top_k`, with MaxScore pruning in the server, which skips postings but,
with these loose bounds, gains little (results/postgres.md):

* **Bounds.** A term's contribution to field f is
  ``boost_f·qtf·idf_f·(k1+1)·tf/(tf+K)`` with ``K > 0``, so it never exceeds
  ``ub_f = boost_f·qtf·idf_f·(k1+1)`` (from ``ragline_terms``, no extra storage).
  With non-negative boosts every contribution is ≥ 0.
* **Two lists per term.** Titles are short and few words appear in them, so
  every term's title bound is high (high title idf, boost 2): a bound over a
  term's whole list would prune nothing. Each term therefore has its full list
  and its title/headings list (postings with ``tf_title > 0 OR tf_headings > 0``,
  a partial index, migration 0002). A chunk outside a term's title/headings
  list gets nothing from it in those fields.
* **Threshold.** The exhaustive scorer restricted to the rarest terms (short
  lists) scores each chunk by a partial sum ≤ its full score; the k-th best
  *filtered* partial score θ is a lower bound of the k-th best full score that
  passes the filters.
* **Split (MaxScore).** Each term is read FULL, TH (title/headings list only) or
  NONE. A chunk in no list read scores at most ``max(Σ_NONE ub_title,
  Σ_NONE ub_headings, Σ_{TH,NONE} ub_text)``; terms are demoted (FULL→TH by
  ascending text bound, then TH→NONE by ascending title/headings bound) while
  that stays below θ, so such a chunk cannot enter the top-k. A chunk read
  survives when ``max_f(partial_f + rest_f) ≥ θ``.
* **Tighter threshold.** A chunk's sum over the lists read is a lower bound
  of its score (terms are read whole or not at all per chunk), so the k-th best
  such sum among chunks passing the filters raises θ before pruning.
* **Exact completion.** Survivors are re-scored from all their postings
  (fetched by chunk key), summed in query-term order (``ORDER BY ord``), the
  order the exhaustive scorer sums in, so the floating-point scores are
  identical, not just close.

Everything runs in one REPEATABLE READ snapshot, so a concurrent write cannot
make the threshold and the final scores disagree. When pruning cannot help
(no θ: fewer than k chunks match the probe terms; or no term is non-essential)
the exhaustive statement runs instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ragline.store.postgres.bm25_query import SLACK, KeywordQuery, term_stats
from ragline.text import bm25
from ragline.types import FieldBoosts

#: Postings (estimated from document frequencies) the threshold probe reads at
#: least: the rarest terms are added until their lists reach this size. Chosen on
#: 100k chunks, 200 SciFact train claims (benchmarks/postgres_bm25.py,
#: results/postgres.md): median speed-up over the exhaustive scorer at k = 10 /
#: 100 was 1.39 / 0.99 with 150, 1.39 / 1.01 with 500, 1.27 / 0.93 with 2,000
#: and 0.98 / 0.78 with 8,000 (a bigger probe costs more than its θ saves).
PROBE_POSTINGS = 500


@dataclass(frozen=True)
class TermBound:
    """A query term's list sizes (from document frequencies) and per-field bounds."""

    term: str
    postings: int  # ≥ the full list's length (Σ of the fields' df)
    bounds: tuple[float, float, float]  # title, headings, text

    @property
    def th(self) -> float:
        return max(self.bounds[0], self.bounds[1])


def term_bounds(
    counts: Mapping[str, int],
    df: Mapping[str, tuple[int, int, int]],
    n: tuple[int, int, int],
    boosts: FieldBoosts,
    k1: float,
) -> list[TermBound]:
    """Bounds of the query terms present in the index, shortest list first.

    ``df``: term → document frequency per field; ``n``: chunks per field.
    """
    weight = (boosts.title, boosts.headings, boosts.text)
    out = []
    for term, qtf in counts.items():
        if term not in df:
            continue
        dfs = df[term]
        t, h, x = (
            w * qtf * (k1 + 1.0) * math.log(1.0 + (nf - d + 0.5) / (d + 0.5)) * (1.0 + SLACK)
            for w, nf, d in zip(weight, n, dfs, strict=True)
        )
        out.append(TermBound(term, sum(dfs), (t, h, x)))
    return sorted(out, key=lambda tb: (tb.postings, tb.term))


def probe_terms(bounds: Sequence[TermBound], min_postings: int) -> list[str]:
    """The rarest terms whose lists together reach ``min_postings``."""
    chosen, total = [], 0
    for tb in bounds:
        if total >= min_postings:
            break
        chosen.append(tb.term)
        total += tb.postings
    return chosen


@dataclass(frozen=True)
class Split:
    """Which list of each term is read, and the bounds of what is not read."""

    full: list[str]
    th: list[str]
    none: list[str]
    rest: tuple[float, float, float]  # per field, what a chunk can still get unseen


def split_terms(bounds: Sequence[TermBound], theta: float) -> Split:
    """Demote terms while a chunk seen in no list read stays below θ."""
    limit = theta * (1.0 - SLACK)
    state = {tb.term: "full" for tb in bounds}
    rest = [0.0, 0.0, 0.0]
    for tb in sorted(bounds, key=lambda tb: (tb.bounds[2], tb.term)):
        if max(rest[0], rest[1], rest[2] + tb.bounds[2]) >= limit:
            break
        rest[2] += tb.bounds[2]
        state[tb.term] = "th"
    for tb in sorted(
        (tb for tb in bounds if state[tb.term] == "th"), key=lambda tb: (tb.th, tb.term)
    ):
        if max(rest[0] + tb.bounds[0], rest[1] + tb.bounds[1], rest[2]) >= limit:
            break
        rest[0] += tb.bounds[0]
        rest[1] += tb.bounds[1]
        state[tb.term] = "none"
    pick = [[tb.term for tb in bounds if state[tb.term] == st] for st in ("full", "th", "none")]
    return Split(pick[0], pick[1], pick[2], (rest[0], rest[1], rest[2]))


def _head(boosts: FieldBoosts, k1: float) -> str:
    """The corpus statistics ``c`` and the per-term weights ``s`` (in query order)."""
    weight = {"title": boosts.title, "headings": boosts.headings, "text": boosts.text}

    def idf(f: str) -> str:
        return (
            f"{weight[f]!r} * q.qtf * {k1 + 1.0!r} * "
            f"ln(1 + (c.n_{f} - t.df_{f} + 0.5) / (t.df_{f} + 0.5)) AS w_{f}"
        )

    return f"""
WITH c AS MATERIALIZED (
    SELECT n_title::float8 AS n_title, n_headings::float8 AS n_headings,
           n_text::float8 AS n_text,
           coalesce(len_title::float8 / nullif(n_title, 0), 1) AS avg_title,
           coalesce(len_headings::float8 / nullif(n_headings, 0), 1) AS avg_headings,
           coalesce(len_text::float8 / nullif(n_text, 0), 1) AS avg_text
    FROM ragline_corpus
),
s AS MATERIALIZED (
    SELECT t.term, q.ord, {", ".join(idf(f) for f in bm25.KEYWORD_FIELDS)}
    FROM unnest(%(terms)s::text[], %(counts)s::int[]) WITH ORDINALITY AS q(term, qtf, ord)
    JOIN ragline_terms t ON t.term = q.term CROSS JOIN c
    ORDER BY q.ord
)"""


def _contribution(f: str, k1: float, b: float) -> str:
    return (
        f"CASE WHEN p.tf_{f} > 0 THEN s.w_{f} * p.tf_{f} / (p.tf_{f} + "
        f"{k1 * (1 - b)!r} + {k1 * b!r} * p.len_{f} / c.avg_{f}) ELSE 0 END"
    )


def _tail(pred: str, select: str) -> str:
    """Ranked ``r(chunk_key, score)`` joined to the chunks that pass the filters."""
    where = f"({pred}) AND " if pred else ""
    return f"""
SELECT ch.*, r.score
FROM (SELECT chunk_key, score FROM r WHERE score > 0 ORDER BY score DESC, chunk_key) r
CROSS JOIN LATERAL (  -- best first, filtered by key lookups until k pass
    SELECT {select} FROM ragline_chunks ch
    WHERE {where}ch.key = r.chunk_key OFFSET 0
) ch
ORDER BY r.score DESC, r.chunk_key
LIMIT %(k)s
"""


def keyword_sql(pred: str, boosts: FieldBoosts, k1: float, b: float, select: str = "ch.id") -> str:
    """One statement scoring BM25 over every posting of the query terms (exhaustive).

    Per field f: Σ over query terms of qtf·idf_f·(k1+1)·tf / (tf + k1·(1−b+b·dl/avgdl_f)),
    and a chunk's score is max_f boost_f·score_f (see :mod:`ragline.text.bm25`).
    The CTEs are materialised and the postings read per query term through a
    LATERAL index lookup, so the plan never scans the postings table whatever
    the planner guesses; candidates are then joined to their chunks (filters)
    best score first. ``select``: the chunk columns returned before the score.
    Postings arrive term by term in query order, so each sum runs in that order.
    """
    fields = bm25.KEYWORD_FIELDS
    sums = ", ".join(f"sum({_contribution(f, k1, b)})" for f in fields)
    return f"""{_head(boosts, k1)},
r AS MATERIALIZED (
    SELECT p.chunk_key, GREATEST({sums}) AS score
    FROM s CROSS JOIN c
    CROSS JOIN LATERAL (  -- OFFSET 0: not flattened, an index lookup per term
        SELECT * FROM ragline_postings p0 WHERE p0.term = s.term OFFSET 0
    ) p
    GROUP BY p.chunk_key
){_tail(pred, select)}"""


def pruned_sql(pred: str, boosts: FieldBoosts, k1: float, b: float, select: str = "ch.id") -> str:
    """The MaxScore statement: the lists read, bound pruning, exact completion.

    Parameters beyond :func:`keyword_sql`'s: ``full`` and ``th`` (terms whose
    full, or title/headings, list is read), ``rest_title``/``rest_headings``/
    ``rest_text`` (what a chunk can still get from lists not read) and ``theta``.
    """
    fields = bm25.KEYWORD_FIELDS
    cols = ", ".join(f"{_contribution(f, k1, b)} AS x_{f}" for f in fields)
    bound = ", ".join(f"sum(x_{f}) + %(rest_{f})s" for f in fields)
    lo = ", ".join(f"sum(x_{f})" for f in fields)
    where = f"({pred}) AND " if pred else ""
    sums = ", ".join(f"sum({_contribution(f, k1, b)} ORDER BY s.ord)" for f in fields)
    return f"""{_head(boosts, k1)},
ep AS MATERIALIZED (  -- the lists read: full lists, and title/headings lists
    SELECT p.chunk_key, {cols}
    FROM s CROSS JOIN c
    CROSS JOIN LATERAL (
        SELECT * FROM ragline_postings p0 WHERE p0.term = s.term OFFSET 0
    ) p
    WHERE s.term = ANY(%(full)s::text[])
    UNION ALL
    SELECT p.chunk_key, {cols}
    FROM s CROSS JOIN c
    CROSS JOIN LATERAL (
        SELECT * FROM ragline_postings p0
        WHERE p0.term = s.term AND (p0.tf_title > 0 OR p0.tf_headings > 0) OFFSET 0
    ) p
    WHERE s.term = ANY(%(th)s::text[])
),
ea AS MATERIALIZED (  -- per chunk read: lo ≤ score ≤ hi
    SELECT chunk_key, GREATEST({lo}) AS lo, GREATEST({bound}) AS hi
    FROM ep GROUP BY chunk_key
),
t2 AS MATERIALIZED (  -- k-th best lo among chunks passing the filters: a tighter theta
    SELECT coalesce((
        SELECT e.lo FROM (SELECT chunk_key, lo FROM ea ORDER BY lo DESC, chunk_key) e
        CROSS JOIN LATERAL (
            SELECT 1 FROM ragline_chunks ch WHERE {where}ch.key = e.chunk_key OFFSET 0
        ) ch
        OFFSET %(k)s - 1 LIMIT 1
    ), 0) * {1.0 - SLACK!r} AS v
),
cand AS MATERIALIZED (  -- chunks whose best case still reaches theta
    SELECT chunk_key FROM ea CROSS JOIN t2 WHERE hi >= GREATEST(%(theta)s, t2.v)
),
r AS MATERIALIZED (  -- exact scores: all the candidates' postings, in query order
    SELECT p.chunk_key, GREATEST({sums}) AS score
    FROM cand CROSS JOIN c
    CROSS JOIN LATERAL (
        SELECT * FROM ragline_postings p0
        WHERE p0.chunk_key = cand.chunk_key AND p0.term = ANY(%(terms)s::text[]) OFFSET 0
    ) p
    JOIN s ON s.term = p.term
    GROUP BY p.chunk_key
){_tail(pred, select)}"""


def _params(query: KeywordQuery, terms: Sequence[str]) -> dict[str, Any]:
    """The exhaustive statement's parameters, scoring ``terms`` of ``query``."""
    return {"terms": list(terms), "counts": [query.counts[t] for t in terms], "k": query.k}


def plan(
    conn: psycopg.Connection[Any], query: KeywordQuery, k1: float, b: float, probe_postings: int
) -> dict[str, Any] | None:
    """Parameters of :func:`pruned_sql` for this query, or None where pruning cannot help.

    Reads the term statistics and runs the threshold probe (the exhaustive
    scorer over the rarest terms, whose lists reach ``probe_postings``).
    """
    terms = query.terms
    df, n = term_stats(conn, terms)
    bounds = term_bounds(query.counts, df, n, query.boosts, k1)
    probe = sorted(probe_terms(bounds, probe_postings))
    if len(probe) == len(bounds):
        return None
    sql = keyword_sql(query.pred, query.boosts, k1, b)
    partial = conn.execute(sql, _params(query, probe)).fetchall()
    if len(partial) < query.k:
        return None
    theta = float(partial[-1][-1])
    split = split_terms(bounds, theta)
    if not split.th and not split.none:
        return None
    return {
        **_params(query, terms),
        "full": split.full,
        "th": split.th,
        "theta": theta * (1.0 - SLACK),
        **{f"rest_{f}": v for f, v in zip(bm25.KEYWORD_FIELDS, split.rest, strict=True)},
    }


def top_k(
    conn: psycopg.Connection[Any],
    query: KeywordQuery,
    k1: float,
    b: float,
    *,
    probe_postings: int = PROBE_POSTINGS,
    snapshot: bool = True,
) -> list[tuple[str, float]]:
    """The k best (chunk id, BM25 score) passing the filters; identical to the
    exhaustive scorer.

    Must run as the first statements of a transaction (one REPEATABLE READ
    snapshot for statistics, probe and scoring); a query with ``prune=False``
    runs the exhaustive statement (the reference the tests compare with);
    ``snapshot=False``: the caller has set the isolation level already.
    """
    params: dict[str, Any] | None = None
    if query.pruned:
        if snapshot:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        params = plan(conn, query, k1, b, probe_postings)
    if params is None:
        sql = keyword_sql(query.pred, query.boosts, k1, b)
        params = _params(query, query.terms)
    else:
        sql = pruned_sql(query.pred, query.boosts, k1, b)
    return [(str(r[0]), float(r[-1])) for r in conn.execute(sql, params).fetchall()]
