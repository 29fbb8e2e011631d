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
(:class:`Formula`), so the scores are equal, not close. Packed postings of
chunks deleted since are scored but never returned: the final chunk lookup
(which also applies the filters) does not find them. Everything runs in one
REPEATABLE READ snapshot.

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

from ragline.store import bm25
from ragline.store.base import FieldBoosts

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
    and a chunk's score is max_f boost_f·score_f (see :mod:`ragline.store.bm25`).
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

_PACK = """string_agg(
    int8send(p.chunk_key) || int4send(p.tf_title) || int4send(p.tf_headings)
    || int4send(p.tf_text) || int4send(p.len_title) || int4send(p.len_headings)
    || int4send(p.len_text), ''::bytea)"""

#: A query's postings: each term's packed list, and its rows newer than the
#: watermark packed the same way (by the (term, chunk_key) index).
_FETCH_SQL = f"""
SELECT q.ord, tp.postings
FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS q(term, ord)
JOIN ragline_term_postings tp ON tp.term = q.term
UNION ALL
SELECT q.ord, {_PACK}
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
    """Pack every term's postings anew when the chunks written since the last
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
    conn.execute("DELETE FROM ragline_term_postings")
    conn.execute(
        f"INSERT INTO ragline_term_postings (term, postings) "
        f"SELECT p.term, {_PACK} FROM ragline_postings p GROUP BY p.term"
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


def score_lists(
    lists: Sequence[np.ndarray],
    weights: Sequence[tuple[float, float, float]],
    avg: tuple[float, float, float],
    formula: Formula,
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct chunk keys (ascending) and their scores, from each query term's
    postings (in query-term order, the order the SQL sums in).

    Contributions are computed for all postings at once per field (zero-tf
    postings skipped: adding 0 changes no sum), then added term by term, so
    each chunk's sums run in query-term order.
    """
    if not lists:
        return np.zeros(0, np.int64), np.zeros(0)
    sizes = [len(lst) for lst in lists]
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    postings = np.concatenate(lists).astype(_NATIVE)
    keys = postings["key"]
    top = int(keys.max(initial=0)) + 1
    dense = top <= max(8 * len(keys), 4_000_000)
    if dense:  # positions = keys
        pos = keys
        seen = np.zeros(top, dtype=bool)
        seen[keys] = True
        present = np.flatnonzero(seen)
        size = top
    else:
        present, pos = np.unique(keys, return_inverse=True)
        size = len(present)
    tf, length = postings["tf"], postings["len"]
    t1, t2 = formula.tables(int(tf.max(initial=0)), int(length.max(initial=0)))
    w = np.asarray(weights, dtype=np.float64).reshape(len(lists), 3)
    acc = np.zeros((3, size))
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
    scores = acc[:, present].max(axis=0) if dense else acc.max(axis=0)
    return present, scores


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


def client_top_k(
    conn: psycopg.Connection[Any],
    counts: Mapping[str, int],
    k: int,
    pred: str,
    boosts: FieldBoosts,
    formula: Formula,
) -> list[tuple[str, float]]:
    """:func:`keyword_sql`'s result, scored in numpy from the postings read in one
    statement (packed, 32 bytes each: the packed lists plus the rows of chunks
    newer than their watermark) instead of in SQL's expression evaluator.
    Runs in one REPEATABLE READ snapshot (the caller's transaction)."""
    terms = sorted(counts)
    df, n = _stats(conn, terms)
    state = conn.execute(_STATE_SQL).fetchone()
    avg = (float(state[0]), float(state[1]), float(state[2])) if state else (1.0, 1.0, 1.0)
    mark = int(state[3]) if state else 0
    present = [t for t in terms if t in df]
    if not present:
        return []
    rows = conn.cursor(binary=True).execute(_FETCH_SQL, {"terms": present, "mark": mark})
    packed: dict[int, list[bytes]] = {}
    for o, data in rows.fetchall():
        packed.setdefault(int(o) - 1, []).append(bytes(data))
    lists, weights = [], []
    boost = (boosts.title, boosts.headings, boosts.text)
    for i, term in enumerate(present):
        if i not in packed:
            continue
        lists.append(np.frombuffer(b"".join(packed[i]), dtype=POSTING))
        weights.append(
            tuple(
                formula.weight(boost[f], counts[term], float(n[f]), df[term][f]) for f in range(3)
            )
        )
    keys, scores = score_lists(lists, weights, avg, formula)  # type: ignore[arg-type]
    live = scores > 0
    keys, scores = keys[live], scores[live]
    where = f" AND ({pred})" if pred else ""
    out: list[tuple[str, float]] = []
    done, m = 0, max(4 * k, 256)
    while done < len(keys):
        order = ranked(keys, scores, m)
        batch = order[done:]
        found = dict(
            conn.execute(
                f"SELECT ch.key, ch.id FROM ragline_chunks ch WHERE ch.key = ANY(%s){where}",
                (keys[batch].tolist(),),
            ).fetchall()
        )
        for j in batch:
            chunk_id = found.get(int(keys[j]))
            if chunk_id is not None:
                out.append((str(chunk_id), float(scores[j])))
                if len(out) == k:
                    return out
        done, m = len(order), 4 * m
    return out
