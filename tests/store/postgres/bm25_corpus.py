"""The generated corpus of the PostgreSQL BM25 tests (loaded by conftest.py).

Chunks whose terms follow a Zipf law (a few terms in most chunks, a long tail
of rare ones), two tenants and a boolean column, so filters remove some of the
best chunks; queries drawn the same way; the filters they run with.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg

from ragline.embed.base import ModelFingerprint
from ragline.store.base import DocumentWrite
from ragline.store.filters import to_sql_predicate
from ragline.store.postgres import PostgresStore
from ragline.store.postgres.bm25_query import KeywordQuery
from ragline.store.postgres.bm25_sql import top_k
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord, FieldBoosts

DIM = 4
VOCAB = 400
DOCS, PER_DOC = 60, 25  # 1,500 chunks


def word(rank: int) -> str:
    """The word of frequency rank ``rank`` (0: the most common)."""
    return f"zq{rank}x"


def make_chunk(rng: np.random.Generator, doc: int, i: int, tenant: str) -> Chunk:
    """Chunk ``i`` of document ``doc``: Zipf text, a random title and heading."""
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


def index_corpus(url: str) -> str:
    """A schema holding the generated corpus (some documents written twice), packed."""
    schema = f"t_bm25_{time.monotonic_ns() % 10**9}"
    store = PostgresStore(url, dimension=DIM, schema=schema)
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
    return schema


def queries() -> list[str]:
    """44 queries: common and rare terms together, and Zipf draws."""
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


def cases(qs: list[str]) -> Iterator[tuple[str, dict[str, int], dict[str, Any] | None, str]]:
    """Each query with each of :data:`FILTERS`: (query, term counts, filters, SQL predicate)."""
    for query in qs:
        counts = bm25.query_counts(query)
        for filters in FILTERS:
            yield query, counts, filters, to_sql_predicate(filters)


@contextmanager
def connect(url: str, schema: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection whose tables are those of ``schema``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))
        yield conn


@contextmanager
def snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """One REPEATABLE READ transaction: the scorers compared read the same rows."""
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def packed_meta(url: str, schema: str) -> tuple[int, int]:
    """(packed terms, watermark) of a schema."""
    with connect(url, schema) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM ragline_term_postings), "
            "coalesce((SELECT (value->>'watermark')::bigint FROM ragline_meta "
            "WHERE key = 'packed_postings'), 0)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def exhaustive(
    conn: psycopg.Connection[Any], counts: Any, k: int, pred: str, boosts: FieldBoosts
) -> list[tuple[str, float]]:
    """The exhaustive SQL scorer's top-k (the reference every scorer must equal)."""
    return top_k(conn, KeywordQuery(counts, k, pred, boosts, prune=False), bm25.K1, bm25.B)
