"""BM25 top-k on PostgreSQL scored in numpy from packed postings, exact: the
default scorer (``bm25_scorer="numpy"``).

The cost of the SQL scorers (:mod:`.bm25_sql`) is the executor's per-row work,
not reading the postings. So each term's postings are kept packed in one
``bytea`` (32-byte records, :func:`repack` at ``optimize()``, up to a chunk-key
watermark), a query reads its terms' packed lists plus the rows of chunks
newer than the watermark in one statement (:func:`read_parts`), and numpy
computes :func:`~.bm25_sql.keyword_sql`'s arithmetic in the same float64
operations and order (:mod:`.bm25_formula`), so the scores are equal, not
close. Each term's list is packed in parts by impact (title/headings, tf > 1,
tf = 1) with per-field bounds, and MaxScore over the parts
(:func:`prune_candidates`) scores only the parts that can lift a chunk into the
top-k, exactly. Packed postings of chunks deleted since are never returned:
the chunk lookups (:class:`Lookup`, which also apply the filters) do not find
them. Everything runs in one REPEATABLE READ snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from ragline.store.postgres.bm25_formula import (
    POSTING,
    Formula,
    Part,
    exact_sums,
    field_sums,
    ranked,
    score_parts,
)
from ragline.store.postgres.bm25_query import SLACK, KeywordQuery, term_stats
from ragline.text import bm25

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
        keys, sums = field_sums([parts[i] for i in probe], avg, formula)
        theta = lookup.kth(keys, sums.max(axis=0, initial=0.0), k)
    limit = theta * (1.0 - SLACK)
    rest = np.zeros(3)
    aside: set[int] = set()
    for i in reversed(by_top):  # lowest bound first
        if float((rest + parts[i].bound).max()) < limit:
            rest += parts[i].bound
            aside.add(i)
    if not aside:  # every part is scored: exactly, in query-term order
        keys, scores = score_parts(parts, avg, formula)
        return Pruned(keys, scores, total + (held if theta else 0), total)
    scored = [i for i in range(len(parts)) if i not in aside]
    keys, sums = field_sums([parts[i] for i in scored], avg, formula)
    theta = max(theta, lookup.kth(keys, sums.max(axis=0, initial=0.0), k))
    hi = (sums + rest[:, None]).max(axis=0, initial=0.0)
    keys = keys[hi >= theta * (1.0 - 2 * SLACK)]
    scores = exact_sums(parts, keys, avg, formula).max(axis=0, initial=0.0)
    work = held + sum(len(parts[i].postings) for i in scored)
    return Pruned(keys, scores, work, total)


def read_parts(
    conn: psycopg.Connection[Any], query: KeywordQuery, formula: Formula
) -> tuple[list[Part], tuple[float, float, float]]:
    """The query terms' postings in parts (packed parts, and the rows newer than
    the watermark as one more part per term) with their bounds, and the average
    field lengths: three statements in the caller's snapshot."""
    terms = query.terms
    df, n = term_stats(conn, terms)
    state = conn.execute(_STATE_SQL).fetchone()
    avg = (float(state[0]), float(state[1]), float(state[2])) if state else (1.0, 1.0, 1.0)
    mark = int(state[3]) if state else 0
    present = [t for t in terms if t in df]
    if not present:
        return [], avg
    boost = (query.boosts.title, query.boosts.headings, query.boosts.text)
    weights = [
        tuple(formula.weight(boost[f], query.counts[t], float(n[f]), df[t][f]) for f in range(3))
        for t in present
    ]
    rows = conn.cursor(binary=True).execute(_FETCH_SQL, {"terms": present, "mark": mark})
    parts = []
    for o, part, max_tf, min_len, data in rows.fetchall():
        i = int(o) - 1
        w: tuple[float, float, float] = weights[i]  # type: ignore[assignment]
        if part == NEWER:  # rows not packed: bounded by the weight itself (tf/(tf+K) < 1)
            bound = np.asarray(w) * (1.0 + 4 * SLACK)
        else:
            bound = formula.bound(w, max_tf, min_len, avg)
        parts.append(Part(i, np.frombuffer(bytes(data), dtype=POSTING), w, bound))
    return parts, avg


def client_top_k(
    conn: psycopg.Connection[Any],
    query: KeywordQuery,
    formula: Formula,
    *,
    probe_postings: int = NUMPY_PROBE_POSTINGS,
    min_postings: int = NUMPY_PRUNE_MIN_POSTINGS,
) -> list[tuple[str, float]]:
    """:func:`~.bm25_sql.keyword_sql`'s result, scored in numpy from the postings
    read in one statement (packed, 32 bytes each: the packed parts plus the rows
    of chunks newer than their watermark) instead of in SQL's expression
    evaluator, with MaxScore pruning over the parts (:func:`prune_candidates`)
    unless the query has ``prune=False`` or a negative boost (then every posting
    is scored). Runs in one REPEATABLE READ snapshot (the caller's transaction)."""
    parts, avg = read_parts(conn, query, formula)
    lookup = Lookup(conn, query.pred)
    if query.pruned:
        kept = prune_candidates(parts, avg, formula, query.k, lookup, probe_postings, min_postings)
        keys, scores = kept.keys, kept.scores
    else:
        keys, scores = score_parts(parts, avg, formula)
    return [(lookup.ids[key], score) for key, score in lookup.best(keys, scores, query.k)]
