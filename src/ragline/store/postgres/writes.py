"""Writes to a PostgreSQL index: chunks and their BM25 postings by binary COPY,
the term and corpus statistics adjusted in the same transaction, document
records upserted. Writers serialise on the corpus row (taken first, so they
cannot deadlock on term rows); every function here runs inside the caller's
transaction.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from ragline.embed.base import Vectors
from ragline.store.base import CHUNK_COLUMNS, DOCUMENT_COLUMNS, metadata_json
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord

#: COPY column list and binary types of a chunk row.
CHUNK_COPY = (
    ("key", "int8"),
    *((c, "text") for c in CHUNK_COLUMNS[:7]),
    ("heading_path", "text[]"),
    *((c, "text") for c in ("url", "anchor")),
    ("chunk_index", "int4"),
    ("start_char", "int8"),
    ("end_char", "int8"),
    ("token_count", "int4"),
    ("word_count", "int4"),
    ("has_code", "bool"),
    ("has_equations", "bool"),
    ("content_hash", "text"),
    ("created_at", "text"),
    ("text", "text"),
    ("page", "int4"),
    ("metadata", "jsonb"),
    ("len_title", "int4"),
    ("len_headings", "int4"),
    ("len_text", "int4"),
    ("embedding", "vector"),
)


@dataclass(frozen=True, slots=True)
class ChunkTerms:
    """A chunk's BM25 postings: term → (tf title, tf headings, tf text), and field lengths."""

    postings: dict[str, tuple[int, int, int]]
    lengths: tuple[int, int, int]

    @classmethod
    def of(cls, chunk: Chunk) -> ChunkTerms:
        fields = bm25.chunk_terms(chunk)
        title, headings, text = (fields[f] for f in bm25.KEYWORD_FIELDS)
        terms = set(title.tf) | set(headings.tf) | set(text.tf)
        postings = {
            t: (title.tf.get(t, 0), headings.tf.get(t, 0), text.tf.get(t, 0)) for t in terms
        }
        return cls(postings, (title.length, headings.length, text.length))


def df_deltas(terms: Iterable[ChunkTerms]) -> dict[str, tuple[int, int, int]]:
    """Per term, in how many of these chunks it occurs in each field."""
    out: dict[str, list[int]] = {}
    for ct in terms:
        for term, tfs in ct.postings.items():
            acc = out.setdefault(term, [0, 0, 0])
            for i, tf in enumerate(tfs):
                if tf:
                    acc[i] += 1
    return {t: (a[0], a[1], a[2]) for t, a in out.items()}


def metadata_jsonb(chunk: Chunk) -> Jsonb:
    # default=str: YAML front matter may hold dates; they come back as strings (as LanceStore).
    return Jsonb(json.loads(metadata_json(chunk.metadata)))


def set_meta(conn: psycopg.Connection[Any], key: str, value: Any) -> None:
    conn.execute(
        "INSERT INTO ragline_meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (key, Jsonb(value)),
    )


def lock_writers(conn: psycopg.Connection[Any]) -> None:
    """Serialise writers on the corpus row before any term row is touched."""
    conn.execute("SELECT 1 FROM ragline_corpus FOR UPDATE")


def remove_chunks(conn: psycopg.Connection[Any], doc_ids: Sequence[str]) -> None:
    """Delete the documents' chunks and postings and subtract them from the statistics."""
    ids = list(doc_ids)
    gone_terms = conn.execute(
        """
        UPDATE ragline_terms t
        SET df_title = t.df_title - d.df_title,
            df_headings = t.df_headings - d.df_headings,
            df_text = t.df_text - d.df_text
        FROM (
            SELECT p.term,
                   count(*) FILTER (WHERE p.tf_title > 0) AS df_title,
                   count(*) FILTER (WHERE p.tf_headings > 0) AS df_headings,
                   count(*) FILTER (WHERE p.tf_text > 0) AS df_text
            FROM ragline_postings p
            WHERE p.chunk_key IN (SELECT key FROM ragline_chunks WHERE doc_id = ANY(%s))
            GROUP BY p.term
        ) d
        WHERE t.term = d.term
        RETURNING t.term, t.df_title, t.df_headings, t.df_text
        """,
        (ids,),
    ).fetchall()
    empty = [t for t, a, h, x in gone_terms if a <= 0 and h <= 0 and x <= 0]
    if empty:
        conn.execute("DELETE FROM ragline_terms WHERE term = ANY(%s)", (empty,))
    conn.execute(
        "DELETE FROM ragline_postings WHERE chunk_key IN "
        "(SELECT key FROM ragline_chunks WHERE doc_id = ANY(%s))",
        (ids,),
    )
    conn.execute(
        """
        WITH gone AS (
            DELETE FROM ragline_chunks WHERE doc_id = ANY(%s)
            RETURNING len_title, len_headings, len_text
        )
        UPDATE ragline_corpus SET
            chunks = chunks - (SELECT count(*) FROM gone),
            n_title = n_title - (SELECT count(*) FROM gone WHERE len_title > 0),
            n_headings = n_headings - (SELECT count(*) FROM gone WHERE len_headings > 0),
            n_text = n_text - (SELECT count(*) FROM gone WHERE len_text > 0),
            len_title = len_title - (SELECT coalesce(sum(len_title), 0) FROM gone),
            len_headings = len_headings - (SELECT coalesce(sum(len_headings), 0) FROM gone),
            len_text = len_text - (SELECT coalesce(sum(len_text), 0) FROM gone)
        """,
        (ids,),
    )


def insert_chunks(
    conn: psycopg.Connection[Any], rows: Sequence[tuple[Chunk, Vectors, ChunkTerms]]
) -> None:
    """COPY chunks and postings in, add them to the statistics."""
    if not rows:
        return
    keys = [
        int(k)
        for (k,) in conn.execute(
            "SELECT nextval('ragline_chunk_key') FROM generate_series(1, %s)", (len(rows),)
        ).fetchall()
    ]
    columns = ", ".join(name for name, _ in CHUNK_COPY)
    with conn.cursor() as cur:
        with cur.copy(f"COPY ragline_chunks ({columns}) FROM STDIN WITH (FORMAT BINARY)") as cp:
            cp.set_types([t for _, t in CHUNK_COPY])
            for key, (c, v, ct) in zip(keys, rows, strict=True):
                cp.write_row(
                    (
                        key,
                        c.id,
                        c.doc_id,
                        c.tenant,
                        c.source,
                        c.title,
                        c.chapter,
                        c.section,
                        list(c.heading_path),
                        c.url,
                        c.anchor,
                        c.chunk_index,
                        c.start_char,
                        c.end_char,
                        c.token_count,
                        c.word_count,
                        c.has_code,
                        c.has_equations,
                        c.content_hash,
                        c.created_at,
                        c.text,
                        c.page,
                        metadata_jsonb(c),
                        *ct.lengths,
                        np.asarray(v, dtype=np.float32),
                    )
                )
        with cur.copy(
            "COPY ragline_postings (term, chunk_key, tf_title, tf_headings, tf_text, "
            "len_title, len_headings, len_text) FROM STDIN WITH (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["text", "int8", "int4", "int4", "int4", "int4", "int4", "int4"])
            for key, (_, _, ct) in zip(keys, rows, strict=True):
                for term, tfs in ct.postings.items():
                    cp.write_row((term, key, *tfs, *ct.lengths))
    deltas = df_deltas(ct for _, _, ct in rows)
    terms = sorted(deltas)
    conn.execute(
        """
        INSERT INTO ragline_terms (term, df_title, df_headings, df_text)
        SELECT * FROM unnest(%s::text[], %s::int[], %s::int[], %s::int[])
        ON CONFLICT (term) DO UPDATE SET
            df_title = ragline_terms.df_title + EXCLUDED.df_title,
            df_headings = ragline_terms.df_headings + EXCLUDED.df_headings,
            df_text = ragline_terms.df_text + EXCLUDED.df_text
        """,
        (
            terms,
            [deltas[t][0] for t in terms],
            [deltas[t][1] for t in terms],
            [deltas[t][2] for t in terms],
        ),
    )
    sums = Counter[int]()
    nonempty = Counter[int]()
    for _, _, ct in rows:
        for i, n in enumerate(ct.lengths):
            sums[i] += n
            nonempty[i] += n > 0
    conn.execute(
        "UPDATE ragline_corpus SET chunks = chunks + %s, "
        "n_title = n_title + %s, n_headings = n_headings + %s, n_text = n_text + %s, "
        "len_title = len_title + %s, len_headings = len_headings + %s, len_text = len_text + %s",
        (len(rows), nonempty[0], nonempty[1], nonempty[2], sums[0], sums[1], sums[2]),
    )


def upsert_documents(conn: psycopg.Connection[Any], records: Sequence[DocumentRecord]) -> None:
    cols = ", ".join(DOCUMENT_COLUMNS)
    marks = ", ".join(["%s"] * len(DOCUMENT_COLUMNS))
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in DOCUMENT_COLUMNS[1:])
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO ragline_documents ({cols}) VALUES ({marks}) "
            f"ON CONFLICT (doc_id) DO UPDATE SET {updates}",
            [tuple(getattr(r, c) for c in DOCUMENT_COLUMNS) for r in records],
        )
