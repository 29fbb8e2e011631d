"""The BM25 side of ChromaStore: a term index in a SQLite file beside the collection.

Chroma ranks no keyword query locally (its sparse/BM25 search is server-cloud
only; ``where_document`` is an unscored filter), so ragline keeps the postings
itself and scores them with :mod:`ragline.text.bm25`, the same analyser and
formula as every other store. The file is a *cache of the collection*: it
records the store generation it mirrors, and the store rebuilds it from Chroma
whenever that differs from the generation in Chroma (another client wrote, a
crash fell between the two, the file was deleted). So Chroma stays the one
source of truth and the index can never silently drift from it.

Tables: ``chunks`` (one row per chunk: every equality-filter column, so filters
push down into the same SQL that ranks, and each BM25 field's token count),
``postings`` (term, field, chunk, tf), ``stats`` (per field: chunks with at least
one token and their total length) and ``meta`` (the generation). Scoring runs in
SQL: per query term and field the IDF is computed here from ``df`` over the whole
collection, then SQLite sums ``idf·(k1+1)·tf/(tf+k1·(1−b+b·dl/avgdl))`` per chunk
and field and keeps the best boosted field, as LanceDB's multi-field query does.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

from ragline.store.base import metadata_json
from ragline.store.filter_sql import chunk_predicate
from ragline.store.filters import CHUNK_FILTER_FIELDS
from ragline.text import bm25
from ragline.types import Chunk, FieldBoosts, Filters

#: Field number of each BM25 field in the ``postings`` table.
FIELD_NUMBER = {name: i for i, name in enumerate(bm25.KEYWORD_FIELDS)}
_FILTER_COLUMNS = tuple(CHUNK_FILTER_FIELDS)
_SQL_TYPE = {str: "TEXT", int: "INTEGER", bool: "INTEGER", float: "REAL"}


def _schema() -> str:
    cols = ", ".join(
        f"{name} {_SQL_TYPE[typ]}" + (" PRIMARY KEY" if name == "id" else "")
        for name, typ in CHUNK_FILTER_FIELDS.items()
    )
    lens = ", ".join(f"len{i} INTEGER NOT NULL" for i in range(len(bm25.KEYWORD_FIELDS)))
    return f"""
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS chunks ({cols}, metadata TEXT, {lens});
    CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (doc_id);
    CREATE TABLE IF NOT EXISTS postings (
        term TEXT NOT NULL, field INTEGER NOT NULL, chunk TEXT NOT NULL, tf INTEGER NOT NULL,
        PRIMARY KEY (term, field, chunk)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS postings_chunk ON postings (chunk);
    CREATE TABLE IF NOT EXISTS stats (
        field INTEGER PRIMARY KEY, n INTEGER NOT NULL, total INTEGER NOT NULL
    );
    """


class TermIndex:
    """Postings and field statistics of one Chroma chunks collection, in SQLite.

    Thread-safe within a process (one connection under a lock); several processes
    may share the file (SQLite locking, WAL journal).
    """

    def __init__(self, path: Path, *, k1: float = bm25.K1, b: float = bm25.B) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.k1, self.b = k1, b
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_schema())

    # ------------------------------------------------------------------ writes

    def generation(self) -> str | None:
        """The store generation this index mirrors (None: never filled)."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return str(row[0]) if row else None

    def apply(self, drop_docs: Sequence[str], chunks: Sequence[Chunk], generation: str) -> None:
        """In one transaction: forget the chunks of ``drop_docs``, index ``chunks``,
        and record ``generation``."""
        with self._lock, self._db:
            self._drop(drop_docs)
            self._add(chunks)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (generation,))

    def rebuild(self, batches: Iterable[Sequence[Chunk]], generation: str) -> int:
        """Replace everything with the given chunks (one transaction); the chunk count."""
        count = 0
        with self._lock, self._db:
            for table in ("chunks", "postings", "stats", "meta"):
                self._db.execute(f"DELETE FROM {table}")
            for batch in batches:
                self._add(batch)
                count += len(batch)
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('generation', ?)", (generation,))
        return count

    def _drop(self, doc_ids: Sequence[str]) -> None:
        for doc_id in doc_ids:
            rows = self._db.execute(
                "SELECT id, len0, len1, len2 FROM chunks WHERE doc_id = ?", (doc_id,)
            ).fetchall()
            for cid, *lengths in rows:
                self._count(lengths, -1)
                self._db.execute("DELETE FROM postings WHERE chunk = ?", (cid,))
            self._db.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))

    def _add(self, chunks: Sequence[Chunk]) -> None:
        marks = ", ".join("?" * (len(_FILTER_COLUMNS) + 1 + len(FIELD_NUMBER)))
        for chunk in chunks:
            terms = bm25.chunk_terms(chunk)
            lengths = [terms[f].length for f in bm25.KEYWORD_FIELDS]
            # the metadata JSON too: metadata filters (language) test it as text
            values = [getattr(chunk, name) for name in _FILTER_COLUMNS]
            values.append(metadata_json(chunk.metadata))
            self._db.execute(f"INSERT OR REPLACE INTO chunks VALUES ({marks})", values + lengths)
            self._db.executemany(
                "INSERT INTO postings VALUES (?, ?, ?, ?)",
                [
                    (term, FIELD_NUMBER[f], chunk.id, tf)
                    for f, ft in terms.items()
                    for term, tf in ft.tf.items()
                ],
            )
            self._count(lengths, 1)

    def _count(self, lengths: Sequence[int], sign: int) -> None:
        for field, length in enumerate(lengths):
            if length:
                self._db.execute(
                    "INSERT INTO stats VALUES (?, ?, ?) ON CONFLICT (field) DO UPDATE SET "
                    "n = n + excluded.n, total = total + excluded.total",
                    (field, sign, sign * length),
                )

    # ------------------------------------------------------------------- reads

    def search(
        self,
        query: str,
        k: int,
        filters: Filters | None = None,
        boosts: FieldBoosts | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k (chunk id, BM25) pairs, best first (ties by id); filters pushed down."""
        predicate = chunk_predicate(filters, "sqlite")  # ValueError naming a bad field
        counts = bm25.query_counts(query)
        b = boosts or FieldBoosts()
        weights = dict(zip(bm25.KEYWORD_FIELDS, (b.title, b.headings, b.text), strict=True))
        if k <= 0 or not counts or not any(w > 0 for w in weights.values()):
            return []
        with self._lock:
            stats = {f: (n, total) for f, n, total in self._db.execute("SELECT * FROM stats")}
            marks = ", ".join("?" * len(counts))
            df = {
                (term, field): n
                for term, field, n in self._db.execute(
                    f"SELECT term, field, count(*) FROM postings WHERE term IN ({marks}) "
                    "GROUP BY term, field",
                    list(counts),
                )
            }
            # one row per (term, field) the query can match: its weight and field stats
            rows = []
            for (term, field), d in df.items():
                n, total = stats.get(field, (0, 0))
                boost = weights[bm25.KEYWORD_FIELDS[field]]
                if n <= 0 or boost <= 0:
                    continue
                rows.append((term, field, counts[term] * bm25.idf(d, n), total / n, boost))
            if not rows:
                return []
            values = ", ".join("(?, ?, ?, ?, ?)" for _ in rows)
            where = f"WHERE {predicate}" if predicate else ""
            lens = "CASE p.field WHEN 0 THEN c.len0 WHEN 1 THEN c.len1 ELSE c.len2 END"
            sql = f"""
                WITH q(term, field, w, avgdl, boost) AS (VALUES {values}),
                per_field AS (
                    SELECT p.chunk AS chunk, p.field AS field, max(q.boost) AS boost,
                           sum(q.w * (? + 1.0) * p.tf
                               / (p.tf + ? * (1.0 - ? + ? * ({lens}) / q.avgdl))) AS s
                    FROM q JOIN postings p ON p.term = q.term AND p.field = q.field
                    JOIN chunks c ON c.id = p.chunk
                    {where}
                    GROUP BY p.chunk, p.field
                )
                SELECT chunk, max(boost * s) AS score FROM per_field
                GROUP BY chunk HAVING score > 0 ORDER BY score DESC, chunk LIMIT ?
            """
            params: list[object] = [v for r in rows for v in r]
            params += [self.k1, self.k1, self.b, self.b, k]
            return [(str(c), float(s)) for c, s in self._db.execute(sql, params)]

    def passing(self, ids: Sequence[str], filters: Filters) -> set[str]:
        """Those of ``ids`` whose chunk passes ``filters`` (for post-filtering ANN hits)."""
        predicate = chunk_predicate(filters, "sqlite") or "1"
        if not ids:
            return set()
        marks = ", ".join("?" * len(ids))
        sql = f"SELECT id FROM chunks WHERE id IN ({marks}) AND ({predicate})"
        with self._lock:
            return {str(r[0]) for r in self._db.execute(sql, list(ids))}

    def count_passing(self, filters: Filters) -> int:
        """Chunks that pass ``filters`` (the filters Chroma's ``where`` cannot say)."""
        predicate = chunk_predicate(filters, "sqlite") or "1"
        with self._lock:
            row = self._db.execute(f"SELECT count(*) FROM chunks WHERE {predicate}").fetchone()
        return int(row[0])

    def count(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT count(*) FROM chunks").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()
