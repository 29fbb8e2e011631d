"""BM25 top-k on PostgreSQL, exact: scored in numpy from packed postings, or in SQL
with MaxScore pruning.

The exhaustive scorer (:func:`keyword_sql`) reads every posting of every query
term; common terms ("cell", "patient") have thousands per 100k chunks, which
made PostgreSQL keyword search ~10× slower than LanceDB's. Two scorers return
the same ids and the same float scores faster:

**numpy** (:func:`client_top_k`, the default). The cost of the SQL scorers is
the executor's per-row work (expressions, hash aggregation: ~1 µs a posting),
not reading the postings. So each term's postings are kept packed in one
``bytea`` (32-byte records, :func:`repack` at ``optimize()``, up to a chunk-key
watermark), a query reads its terms' packed lists plus the rows of chunks
newer than the watermark in one statement, and numpy computes
:func:`keyword_sql`'s arithmetic in the same float64 operations and order
(:class:`Formula`), so the scores are equal, not close. Each term's list is
packed in parts by impact (title/headings, tf > 1, tf = 1) with per-field
bounds, and MaxScore over the parts (:func:`prune_candidates`) scores only the
parts that can lift a chunk into the top-k, exactly. Packed postings of
chunks deleted since are never returned: the chunk lookups (which also apply
the filters) do not find them. Everything runs in one REPEATABLE READ snapshot.

**sql** (:func:`top_k`): MaxScore pruning in the server, which skips postings
but, with these loose bounds, gains little (results/postgres.md):

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
from decimal import Decimal
from typing import Any

import numpy as np
import psycopg

from ragline.text import bm25
from ragline.types import FieldBoosts

#: Postings (estimated from document frequencies) the threshold probe reads at
#: least: the rarest terms are added until their lists reach this size. Chosen on
#: 100k chunks, 200 SciFact train claims (benchmarks/postgres_bm25.py,
#: results/postgres.md): median speed-up over the exhaustive scorer at k = 10 /
#: 100 was 1.39 / 0.99 with 150, 1.39 / 1.01 with 500, 1.27 / 0.93 with 2,000
#: and 0.98 / 0.78 with 8,000 (a bigger probe costs more than its θ saves).
PROBE_POSTINGS = 500
#: Where a query's BM25 is computed: "numpy" (postings read packed in one
#: statement, scored client side: :func:`client_top_k`) or "sql" (in the
#: server: :func:`top_k`, MaxScore-pruned unless told not to).
SCORERS = ("numpy", "sql")
#: Relative slack on bounds and threshold: float rounding never prunes a chunk
#: whose exact score reaches θ.
_SLACK = 1e-9


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
            w * qtf * (k1 + 1.0) * math.log(1.0 + (nf - d + 0.5) / (d + 0.5)) * (1.0 + _SLACK)
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
    limit = theta * (1.0 - _SLACK)
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
    ), 0) * {1.0 - _SLACK!r} AS v
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


def _stats(
    conn: psycopg.Connection[Any], terms: Sequence[str]
) -> tuple[dict[str, tuple[int, int, int]], tuple[int, int, int]]:
    rows = conn.execute(
        "SELECT term, df_title, df_headings, df_text FROM ragline_terms WHERE term = ANY(%s)",
        (list(terms),),
    ).fetchall()
    corpus = conn.execute("SELECT n_title, n_headings, n_text FROM ragline_corpus").fetchone()
    n = (int(corpus[0]), int(corpus[1]), int(corpus[2])) if corpus else (0, 0, 0)
    return {str(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}, n


def plan(
    conn: psycopg.Connection[Any],
    counts: Mapping[str, int],
    k: int,
    pred: str,
    boosts: FieldBoosts,
    k1: float,
    b: float,
    probe_postings: int = PROBE_POSTINGS,
) -> dict[str, Any] | None:
    """Parameters of :func:`pruned_sql` for this query, or None where pruning cannot help.

    Reads the term statistics and runs the threshold probe (the exhaustive
    scorer over the rarest terms, whose lists reach ``probe_postings``).
    """
    terms = sorted(counts)
    df, n = _stats(conn, terms)
    bounds = term_bounds(counts, df, n, boosts, k1)
    probe = sorted(probe_terms(bounds, probe_postings))
    if len(probe) == len(bounds):
        return None
    partial = conn.execute(
        keyword_sql(pred, boosts, k1, b),
        {"terms": probe, "counts": [counts[t] for t in probe], "k": k},
    ).fetchall()
    if len(partial) < k:
        return None
    theta = float(partial[-1][-1])
    split = split_terms(bounds, theta)
    if not split.th and not split.none:
        return None
    return {
        "terms": terms,
        "counts": [counts[t] for t in terms],
        "k": k,
        "full": split.full,
        "th": split.th,
        "theta": theta * (1.0 - _SLACK),
        **{f"rest_{f}": v for f, v in zip(bm25.KEYWORD_FIELDS, split.rest, strict=True)},
    }


def top_k(
    conn: psycopg.Connection[Any],
    counts: Mapping[str, int],
    k: int,
    pred: str,
    boosts: FieldBoosts,
    k1: float,
    b: float,
    *,
    prune: bool = True,
    probe_postings: int = PROBE_POSTINGS,
    snapshot: bool = True,
) -> list[tuple[str, float]]:
    """The k best (chunk id, BM25 score) passing ``pred``; identical to the exhaustive scorer.

    Must run as the first statements of a transaction (one REPEATABLE READ
    snapshot for statistics, probe and scoring); ``prune=False`` runs the
    exhaustive statement (the reference the tests compare with);
    ``snapshot=False``: the caller has set the isolation level already.
    """
    terms = sorted(counts)
    params: dict[str, Any] | None = None
    if prune and min(boosts.title, boosts.headings, boosts.text) >= 0:
        if snapshot:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        params = plan(conn, counts, k, pred, boosts, k1, b, probe_postings)
    if params is None:
        sql = keyword_sql(pred, boosts, k1, b)
        params = {"terms": terms, "counts": [counts[t] for t in terms], "k": k}
    else:
        sql = pruned_sql(pred, boosts, k1, b)
    return [(str(r[0]), float(r[-1])) for r in conn.execute(sql, params).fetchall()]


# ------------------------------------------------- scoring in numpy (client side)

#: One posting as packed (PostgreSQL's binary send format of each column).
POSTING = np.dtype([("key", ">i8"), ("tf", ">i4", (3,)), ("len", ">i4", (3,))])
_NATIVE = np.dtype([("key", "i8"), ("tf", "i4", (3,)), ("len", "i4", (3,))])
#: Share of the corpus written or deleted since the last packing above which
#: optimize() packs the postings again. Rows newer than the watermark cost
#: about 3× a packed posting to read (string_agg in the server: 24.5 ms vs
#: 8.2 ms for a plain scan of the same ~27k postings per query at 100k chunks,
#: benchmarks/results/postgres.md), so 5 % of unpacked postings add ≤ ~15 % to a
#: query, while packing at 1M chunks takes minutes.
REPACK_FRACTION = 0.05
#: ``ragline_meta`` key of the packed lists' watermark and chunk count.
PACKED_META = "packed_postings"
#: Postings the numpy scorer's threshold probe scores at least: the parts with
#: the highest bounds are added until they hold this many (see
#: :func:`prune_candidates`). Chosen on 100 SciFact claims on the 1M index
#: (results/postgres.md), client CPU per query: k = 10, 12.6 / 11.7 / 13.4 ms
#: with 2,000 / 5,000 / 20,000 (43 / 43 / 48 % of the postings scored in full);
#: k = 100, 12.5 / 13.3 ms with 5,000 / 20,000 (44 / 49 %).
NUMPY_PROBE_POSTINGS = 5_000
#: Below this many postings in a query the numpy scorer scores them all: pruning's
#: extra lookups cost more than it saves. 100 SciFact claims, k = 100: at 100k
#: chunks (~27k postings a query) pruning took 3.2 ms of client CPU against
#: 2.7 ms for scoring everything, at 1M (~270k) 12.5 against 20.2 ms
#: (results/postgres.md).
NUMPY_PRUNE_MIN_POSTINGS = 100_000
#: ``part`` of the rows newer than the watermark (read from ragline_postings).
NEWER = -1

_PACK = """string_agg(
    int8send(p.chunk_key) || int4send(p.tf_title) || int4send(p.tf_headings)
    || int4send(p.tf_text) || int4send(p.len_title) || int4send(p.len_headings)
    || int4send(p.len_text), ''::bytea)"""

#: A posting's part: in a title or heading (0), text only with tf > 1 (1), tf = 1 (2).
_PART = "CASE WHEN p.tf_title > 0 OR p.tf_headings > 0 THEN 0 WHEN p.tf_text > 1 THEN 1 ELSE 2 END"

#: A query's postings: each term's packed parts, and its rows newer than the
#: watermark packed the same way (by the (term, chunk_key) index).
_FETCH_SQL = f"""
SELECT q.ord, tp.part, tp.max_tf, tp.min_len, tp.postings
FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, ord)
JOIN ragline_term_postings tp ON tp.term = q.term
UNION ALL
SELECT q.ord, {NEWER}::smallint, NULL, NULL, {_PACK}
FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, ord)
CROSS JOIN LATERAL (
    SELECT * FROM ragline_postings p0
    WHERE p0.term = q.term AND p0.chunk_key > %(mark)s OFFSET 0
) p
GROUP BY q.ord
"""

_STATE_SQL = """
SELECT coalesce(len_title::float8 / nullif(n_title, 0), 1),
       coalesce(len_headings::float8 / nullif(n_headings, 0), 1),
       coalesce(len_text::float8 / nullif(n_text, 0), 1),
       coalesce((SELECT (value->>'watermark')::bigint FROM ragline_meta
                 WHERE key = 'packed_postings'), 0)
FROM ragline_corpus
"""


def repack(conn: psycopg.Connection[Any], fraction: float) -> bool:
    """Pack every term's postings anew, in parts (:data:`_PART`) with their largest
    tf and smallest length per field, when the chunks written since the last
    packing plus those deleted since exceed ``fraction`` of the corpus; whether
    it did. Runs in the caller's transaction, which must hold the writers' lock
    (so every chunk key up to the new watermark is committed and visible)."""
    row = conn.execute(
        "SELECT (SELECT chunks FROM ragline_corpus), "
        "coalesce((value->>'watermark')::bigint, 0), coalesce((value->>'chunks')::bigint, 0) "
        "FROM (SELECT NULL) x LEFT JOIN ragline_meta ON key = %s",
        (PACKED_META,),
    ).fetchone()
    chunks, mark, packed = (int(v or 0) for v in row) if row else (0, 0, 0)
    older = conn.execute("SELECT count(*) FROM ragline_chunks WHERE key <= %s", (mark,)).fetchone()
    live = int(older[0]) if older else 0
    changed = (chunks - live) + (packed - live)  # written since + deleted since
    if changed <= fraction * chunks:
        return False
    fields = bm25.KEYWORD_FIELDS
    max_tf = ", ".join(f"max(p.tf_{f})" for f in fields)
    min_len = ", ".join(f"coalesce(min(p.len_{f}) FILTER (WHERE p.tf_{f} > 0), 0)" for f in fields)
    conn.execute("DELETE FROM ragline_term_postings")
    conn.execute(
        f"INSERT INTO ragline_term_postings (term, part, max_tf, min_len, postings) "
        f"SELECT p.term, {_PART}, ARRAY[{max_tf}], ARRAY[{min_len}], {_PACK} "
        f"FROM ragline_postings p GROUP BY 1, 2"
    )
    conn.execute(
        "INSERT INTO ragline_meta (key, value) SELECT %s, jsonb_build_object("
        "'watermark', coalesce(max(key), 0), 'chunks', count(*)) FROM ragline_chunks "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (PACKED_META,),
    )
    return True


def forget_packed(conn: psycopg.Connection[Any]) -> None:
    """Drop the packed lists (every posting is read from rows until the next packing)."""
    conn.execute("DELETE FROM ragline_term_postings")
    conn.execute("DELETE FROM ragline_meta WHERE key = %s", (PACKED_META,))


class Formula:
    """:func:`keyword_sql`'s arithmetic reproduced bit for bit in float64.

    The SQL mixes numeric literals with float8 columns, so some steps are exact
    decimals rounded once to float8: ``boost·qtf·(k1+1)``, ``tf + k1(1−b)`` and
    ``k1·b·len``. Those are computed with :class:`~decimal.Decimal` (tables per
    integer ``tf``/``len``, grown on demand); everything else is the same
    float8 operations in the same order, and ``ln`` is the C library's ``log``
    in both. Equal inputs therefore give equal scores, not just close ones.
    """

    def __init__(self, k1: float, b: float) -> None:
        self.coef = Decimal(repr(k1 + 1.0))
        self.a1 = Decimal(repr(k1 * (1 - b)))
        self.a2 = Decimal(repr(k1 * b))
        self._t1 = np.zeros(0)
        self._t2 = np.zeros(0)

    def weight(self, boost: float, qtf: int, n: float, df: int) -> float:
        """``s.w_f`` of :func:`_head`: boost·qtf·(k1+1)·idf."""
        w = float(Decimal(repr(boost)) * qtf * self.coef)
        return w * math.log(1 + ((n - df) + 0.5) / (df + 0.5))

    def tables(self, max_tf: int, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """``tf + k1(1−b)`` and ``k1·b·len`` as float8, indexed by the integer."""
        t1, t2 = self._t1, self._t2  # locals: another thread may swap the tables
        if len(t1) <= max_tf:
            t1 = self._t1 = np.array([float(t + self.a1) for t in range(2 * max_tf + 16)])
        if len(t2) <= max_len:
            t2 = self._t2 = np.array([float(self.a2 * n) for n in range(2 * max_len + 64)])
        return t1, t2

    def bound(
        self,
        weights: tuple[float, float, float],
        max_tf: Sequence[int],
        min_len: Sequence[int],
        avg: tuple[float, float, float],
    ) -> np.ndarray:
        """Per field, the most a posting with tf ≤ ``max_tf`` and length ≥ ``min_len``
        adds to a chunk's score: ``w·tf/(tf + k1(1−b) + k1·b·len/avg)`` grows with
        tf and falls with len. Raised by a relative slack, so float rounding of
        the exact sums never exceeds it."""
        out = np.zeros(3)
        for f in range(3):
            tf, ln = int(max_tf[f]), int(min_len[f])
            if tf > 0:
                sat = tf / (tf + float(self.a1) + float(self.a2) * ln / avg[f])
                out[f] = weights[f] * sat * (1.0 + 4 * _SLACK)
        return out


@dataclass(frozen=True)
class Part:
    """Some postings of one query term, and per field the most each adds to a score."""

    term: int  # index of the term in query-term order
    postings: np.ndarray  # POSTING records, one chunk at most once
    weights: tuple[float, float, float]  # the term's per-field weight (Formula.weight)
    bound: np.ndarray  # (3,) float

    @property
    def top(self) -> float:
        return float(self.bound.max(initial=0.0))


def _positions(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (ascending) and each key's index among them: through a
    dense map when the keys are not much sparser than their count (no sort)."""
    top = int(keys.max(initial=0)) + 1
    if top <= 16 * len(keys):
        seen = np.zeros(top, dtype=bool)
        seen[keys] = True
        present = np.flatnonzero(seen)
        index = np.empty(top, dtype=np.int64)  # only the entries written are read
        index[present] = np.arange(len(present))
        return present, index[keys]
    present, pos = np.unique(keys, return_inverse=True)
    return present, pos


def field_sums(
    lists: Sequence[np.ndarray],
    weights: Sequence[tuple[float, float, float]],
    avg: tuple[float, float, float],
    formula: Formula,
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct chunk keys (ascending) and their per-field sums ``(3, n)``, from
    postings lists in the order to sum them (a chunk at most once per list).

    Contributions are computed for all postings at once per field (zero-tf
    postings skipped: adding 0 changes no sum), then added list by list, so
    each chunk's sums run in list order.
    """
    if not lists:
        return np.zeros(0, np.int64), np.zeros((3, 0))
    sizes = [len(lst) for lst in lists]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    postings = np.concatenate(lists).astype(_NATIVE)
    present, pos = _positions(postings["key"])
    tf, length = postings["tf"], postings["len"]
    t1, t2 = formula.tables(int(tf.max(initial=0)), int(length.max(initial=0)))
    w = np.asarray(weights, dtype=np.float64).reshape(len(lists), 3)
    acc = np.zeros((3, len(present)))
    for f in range(3):
        nz = np.flatnonzero(tf[:, f] > 0)
        if not len(nz):
            continue
        t = tf[nz, f]
        wf = np.repeat(w[:, f], sizes)[nz]
        c = (wf * t) / (t1[t] + t2[length[nz, f]] / avg[f])
        cut = np.searchsorted(nz, bounds)
        p, row = pos[nz], acc[f]
        for i in range(len(lists)):
            if cut[i] < cut[i + 1]:
                row[p[cut[i] : cut[i + 1]]] += c[cut[i] : cut[i + 1]]
    return present, acc


def score_lists(
    lists: Sequence[np.ndarray],
    weights: Sequence[tuple[float, float, float]],
    avg: tuple[float, float, float],
    formula: Formula,
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct chunk keys (ascending) and their scores, from each query term's
    postings (in query-term order, the order the SQL sums in)."""
    keys, sums = field_sums(lists, weights, avg, formula)
    return keys, sums.max(axis=0, initial=0.0)


def exact_sums(
    parts: Sequence[Part],
    keys: np.ndarray,
    avg: tuple[float, float, float],
    formula: Formula,
) -> np.ndarray:
    """Per-field sums ``(3, len(keys))`` of the chunks ``keys`` (distinct, ascending)
    over all their postings in ``parts``, added in query-term order as
    :func:`field_sums` would over each term's whole list."""
    acc = np.zeros((3, len(keys)))
    if not len(keys):
        return acc
    found = [part.postings["key"].astype(np.int64) for part in parts]
    top = max(int(f.max(initial=0)) for f in found) + 1
    where: np.ndarray | None = None
    if top <= 16 * sum(len(f) for f in found):
        where = np.full(top, -1, dtype=np.int32)
        where[keys] = np.arange(len(keys))
    hits = []
    for part_keys in found:
        if where is not None:
            idx = where[part_keys]
        else:
            at = np.minimum(np.searchsorted(keys, part_keys), len(keys) - 1)
            idx = np.where(keys[at] == part_keys, at, -1)
        hits.append(np.flatnonzero(idx >= 0))
        hits[-1] = np.stack((hits[-1], idx[hits[-1]]))
    rows = [parts[i].postings[hits[i][0]].astype(_NATIVE) for i in range(len(parts))]
    t1, t2 = formula.tables(
        max(int(r["tf"].max(initial=0)) for r in rows),
        max(int(r["len"].max(initial=0)) for r in rows),
    )
    for i in sorted(range(len(parts)), key=lambda i: parts[i].term):
        tf, length, idx = rows[i]["tf"], rows[i]["len"], hits[i][1]
        for f in range(3):
            nz = np.flatnonzero(tf[:, f] > 0)
            t = tf[nz, f]
            c = (parts[i].weights[f] * t) / (t1[t] + t2[length[nz, f]] / avg[f])
            acc[f, idx[nz]] += c
    return acc


def ranked(keys: np.ndarray, scores: np.ndarray, m: int) -> np.ndarray:
    """Indices of the ``m`` best (ties at the cut included), score descending then
    key ascending: the exhaustive statement's ``ORDER BY score DESC, chunk_key``."""
    if len(scores) > m:
        cut = np.partition(scores, len(scores) - m)[len(scores) - m]
        sel = np.flatnonzero(scores >= cut)
    else:
        sel = np.arange(len(scores))
    order: np.ndarray = np.lexsort((keys[sel], -scores[sel]))
    return np.asarray(sel[order])


class Lookup:
    """Which chunk keys are live and pass the filters (and their ids): asked of
    the server in batches, remembered for the rest of the query. Without filters,
    a threshold only needs liveness, which the primary key's index answers
    without reading the table (index-only, after VACUUM); ids are read for the
    final hits alone."""

    def __init__(self, conn: psycopg.Connection[Any], pred: str) -> None:
        self._conn = conn
        self._pred = pred
        self.passing: dict[int, bool] = {}
        self.ids: dict[int, str] = {}
        self.calls = 0

    def ask(self, keys: Sequence[int], ids: bool) -> None:
        todo = [key for key in keys if key not in (self.ids if ids else self.passing)]
        todo = [key for key in todo if self.passing.get(key, True)]  # known to fail: skip
        if not todo:
            return
        self.calls += 1
        param = ("{" + ",".join(map(str, todo)) + "}",)  # faster than a list's dumper
        where = f" AND ({self._pred})" if self._pred else ""
        if ids or self._pred:
            found = dict(
                self._conn.execute(
                    f"SELECT ch.key, ch.id FROM ragline_chunks ch "
                    f"WHERE ch.key = ANY(%s::bigint[]){where}",
                    param,
                ).fetchall()
            )
            self.ids.update((int(key), str(v)) for key, v in found.items())
        else:
            found = {
                key: None
                for (key,) in self._conn.execute(
                    "SELECT key FROM ragline_chunks WHERE key = ANY(%s::bigint[])", param
                ).fetchall()
            }
        for key in todo:
            self.passing[key] = key in found

    def best(
        self, keys: np.ndarray, scores: np.ndarray, k: int, ids: bool = True
    ) -> list[tuple[int, float]]:
        """The ``k`` best (key, score) with score > 0 of the chunks that pass, best
        first, ties by key (the exhaustive statement's order); ``ids``: read
        their chunk ids too (:attr:`ids`)."""
        live = scores > 0
        keys, scores = keys[live], scores[live]
        out: list[tuple[int, float]] = []
        done, m = 0, k + 16
        while done < len(keys):
            order = ranked(keys, scores, m)
            batch = order[done:]
            self.ask(keys[batch].tolist(), ids)
            for j in batch:
                key = int(keys[j])
                if self.passing[key]:
                    out.append((key, float(scores[j])))
                    if len(out) == k:
                        return out
            done, m = len(order), 4 * m
        return out

    def kth(self, keys: np.ndarray, scores: np.ndarray, k: int) -> float:
        """The k-th best score among chunks that pass (0 when fewer than k do)."""
        best = self.best(keys, scores, k, ids=False)
        return best[-1][1] if len(best) == k else 0.0


@dataclass(frozen=True)
class Pruned:
    """What :func:`prune_candidates` kept, and the work it did."""

    keys: np.ndarray  # distinct chunk keys, ascending
    scores: np.ndarray  # their exact scores
    scored: int  # postings scored in full (the probe's and the parts not set aside)
    postings: int  # postings of the query terms


def prune_candidates(
    parts: Sequence[Part],
    avg: tuple[float, float, float],
    formula: Formula,
    k: int,
    lookup: Lookup,
    probe_postings: int = NUMPY_PROBE_POSTINGS,
    min_postings: int = NUMPY_PRUNE_MIN_POSTINGS,
) -> Pruned:
    """Keys and exact scores of a set of chunks that holds the filtered top-k,
    scoring fully only the parts that can lift a chunk into it.

    MaxScore over parts, exact:

    * A part's bound (:meth:`Formula.bound`) is the most one of its postings adds
      per field, and every contribution is ≥ 0 (boosts ≥ 0), so a chunk's score
      (max over fields of its sums) is at least its sum over any subset of its
      postings and at most ``max_f Σ bound_f`` over the parts it is in.
    * θ: the parts with the highest bounds (holding ≥ ``probe_postings``) are
      scored; the k-th best such partial score among chunks that are live and
      pass the filters (:class:`Lookup`) is ≤ the k-th best full score that passes.
    * Parts are set aside, lowest bound first, while the sum of their bounds
      stays below θ: a chunk found only in them scores < θ, so it is not in the
      top-k. The other parts are scored; the k-th best of those partial scores
      that passes raises θ; a chunk survives when its partial sums plus the
      bounds set aside reach θ.
    * Survivors are scored exactly (:func:`exact_sums`: each term's contribution,
      looked up in the parts set aside too, added in query-term order, the
      exhaustive scorer's order), so their scores are identical floats.

    Every chunk left out scores strictly below k chunks that pass, so the top-k
    of what is returned is the exhaustive top-k, ties included. Queries with
    fewer than ``min_postings`` postings are scored in full.
    """
    total = sum(len(part.postings) for part in parts)
    if total < min_postings:
        probe_postings = total
    by_top = sorted(range(len(parts)), key=lambda i: (-parts[i].top, len(parts[i].postings), i))
    probe, held = [], 0
    for i in by_top:
        if held >= probe_postings:
            break
        probe.append(i)
        held += len(parts[i].postings)
    theta = 0.0
    if len(probe) < len(parts):
        keys, sums = field_sums(
            [parts[i].postings for i in probe], [parts[i].weights for i in probe], avg, formula
        )
        theta = lookup.kth(keys, sums.max(axis=0, initial=0.0), k)
    limit = theta * (1.0 - _SLACK)
    rest = np.zeros(3)
    aside: set[int] = set()
    for i in reversed(by_top):  # lowest bound first
        if float((rest + parts[i].bound).max()) < limit:
            rest += parts[i].bound
            aside.add(i)
    if not aside:  # every part is scored: exactly, in query-term order
        order = sorted(range(len(parts)), key=lambda i: parts[i].term)
        keys, scores = score_lists(
            [parts[i].postings for i in order], [parts[i].weights for i in order], avg, formula
        )
        return Pruned(keys, scores, total + (held if theta else 0), total)
    scored = [i for i in range(len(parts)) if i not in aside]
    keys, sums = field_sums(
        [parts[i].postings for i in scored], [parts[i].weights for i in scored], avg, formula
    )
    theta = max(theta, lookup.kth(keys, sums.max(axis=0, initial=0.0), k))
    hi = (sums + rest[:, None]).max(axis=0, initial=0.0)
    keys = keys[hi >= theta * (1.0 - 2 * _SLACK)]
    scores = exact_sums(parts, keys, avg, formula).max(axis=0, initial=0.0)
    work = held + sum(len(parts[i].postings) for i in scored)
    return Pruned(keys, scores, work, total)


def read_parts(
    conn: psycopg.Connection[Any],
    counts: Mapping[str, int],
    boosts: FieldBoosts,
    formula: Formula,
) -> tuple[list[Part], tuple[float, float, float]]:
    """The query terms' postings in parts (packed parts, and the rows newer than
    the watermark as one more part per term) with their bounds, and the average
    field lengths: three statements in the caller's snapshot."""
    terms = sorted(counts)
    df, n = _stats(conn, terms)
    state = conn.execute(_STATE_SQL).fetchone()
    avg = (float(state[0]), float(state[1]), float(state[2])) if state else (1.0, 1.0, 1.0)
    mark = int(state[3]) if state else 0
    present = [t for t in terms if t in df]
    if not present:
        return [], avg
    boost = (boosts.title, boosts.headings, boosts.text)
    weights = [
        tuple(formula.weight(boost[f], counts[t], float(n[f]), df[t][f]) for f in range(3))
        for t in present
    ]
    rows = conn.cursor(binary=True).execute(_FETCH_SQL, {"terms": present, "mark": mark})
    parts = []
    for o, part, max_tf, min_len, data in rows.fetchall():
        i = int(o) - 1
        w: tuple[float, float, float] = weights[i]  # type: ignore[assignment]
        if part == NEWER:  # rows not packed: bounded by the weight itself (tf/(tf+K) < 1)
            bound = np.asarray(w) * (1.0 + 4 * _SLACK)
        else:
            bound = formula.bound(w, max_tf, min_len, avg)
        parts.append(Part(i, np.frombuffer(bytes(data), dtype=POSTING), w, bound))
    return parts, avg


def client_top_k(
    conn: psycopg.Connection[Any],
    counts: Mapping[str, int],
    k: int,
    pred: str,
    boosts: FieldBoosts,
    formula: Formula,
    *,
    prune: bool = True,
    probe_postings: int = NUMPY_PROBE_POSTINGS,
    min_postings: int = NUMPY_PRUNE_MIN_POSTINGS,
) -> list[tuple[str, float]]:
    """:func:`keyword_sql`'s result, scored in numpy from the postings read in one
    statement (packed, 32 bytes each: the packed parts plus the rows of chunks
    newer than their watermark) instead of in SQL's expression evaluator, with
    MaxScore pruning over the parts (:func:`prune_candidates`) unless
    ``prune=False`` or a boost is negative (then every posting is scored).
    Runs in one REPEATABLE READ snapshot (the caller's transaction)."""
    parts, avg = read_parts(conn, counts, boosts, formula)
    lookup = Lookup(conn, pred)
    if prune and min(boosts.title, boosts.headings, boosts.text) >= 0:
        kept = prune_candidates(parts, avg, formula, k, lookup, probe_postings, min_postings)
        keys, scores = kept.keys, kept.scores
    else:
        order = sorted(range(len(parts)), key=lambda i: parts[i].term)
        keys, scores = score_lists(
            [parts[i].postings for i in order], [parts[i].weights for i in order], avg, formula
        )
    return [(lookup.ids[key], score) for key, score in lookup.best(keys, scores, k)]
