"""On SciFact (5,183 abstracts, one chunk each) every SciFact train claim gets the
exhaustive SQL scorer's BM25 top-10 from the numpy scorer (packed postings, and
rows written after the packing; MaxScore over the packed parts with the default
probe and with a small one, so that parts are set aside; also top-100) and from
the MaxScore-pruned SQL scorer:
identical ids, order and float scores. Real PostgreSQL; vectors are random
(BM25 reads none)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ragline.embed.base import ModelFingerprint
from ragline.store.base import DocumentWrite
from ragline.store.postgres import PostgresStore
from ragline.store.reads import keyword_candidates
from ragline.types import Chunk, DocumentRecord

DIM = 4


def writes(scifact: Path) -> list[DocumentWrite]:
    rng = np.random.default_rng(0)
    out = []
    with (scifact / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            doc = f"s{row['_id']}"
            text = str(row["text"])
            chunk = Chunk(
                id=f"{doc}/0",
                doc_id=doc,
                tenant="sci",
                source=f"scifact/{row['_id']}",
                title=str(row["title"]),
                chapter="",
                section="",
                heading_path=(),
                url="",
                anchor="",
                chunk_index=0,
                start_char=0,
                end_char=len(text),
                token_count=len(text.split()),
                word_count=len(text.split()),
                has_code=False,
                has_equations=False,
                content_hash=doc,
                created_at="2024-01-01T00:00:00Z",
                text=text,
            )
            record = DocumentRecord(doc, "sci", chunk.source, doc, 1, 1, "", "", "beir", "now")
            out.append(
                DocumentWrite(record, [chunk], rng.standard_normal((1, DIM), dtype=np.float32))
            )
    return out


def train_claims(scifact: Path) -> list[str]:
    with (scifact / "qrels" / "train.tsv").open(encoding="utf-8") as f:
        ids = {line.split("\t")[0] for line in f if line[:1].isdigit()}
    with (scifact / "queries.jsonl").open(encoding="utf-8") as f:
        return [r["text"] for r in map(json.loads, f) if str(r["_id"]) in ids]


@pytest.fixture(scope="module")
def schema(pg_url: str, scifact: Path) -> Iterator[str]:
    name = f"t_scifact_{time.monotonic_ns() % 10**9}"
    docs = writes(scifact)
    with PostgresStore(pg_url, dimension=DIM, schema=name) as store:
        store.fingerprint(ModelFingerprint(name="scifact", dimension=DIM, digest="c" * 64))
        for i in range(0, len(docs) - 200, 500):
            store.replace_documents(docs[i : min(i + 500, len(docs) - 200)])
        store.optimize()  # packs the postings of all but the last 200 abstracts
        store.replace_documents(docs[-200:])  # read from rows (4 % < the repack fraction)
    yield name


def test_train_claims_top10_identical_to_exhaustive(
    pg_url: str, scifact: Path, schema: str
) -> None:
    claims = train_claims(scifact)
    assert len(claims) == 809
    with (
        PostgresStore(pg_url, dimension=DIM, schema=schema) as numpy_,
        PostgresStore(
            pg_url,
            dimension=DIM,
            schema=schema,
            bm25_numpy_probe_postings=300,
            bm25_numpy_prune_min_postings=0,
        ) as numpy_small,
        PostgresStore(pg_url, dimension=DIM, schema=schema, bm25_scorer="sql") as pruned,
        PostgresStore(
            pg_url, dimension=DIM, schema=schema, bm25_scorer="sql", bm25_prune=False
        ) as exact,
    ):
        same_numpy = same_small = same_pruned = same_100 = 0
        for claim in claims:
            want = keyword_candidates(exact, claim, 10)
            assert len(want) == 10, claim
            same_numpy += keyword_candidates(numpy_, claim, 10) == want
            same_small += keyword_candidates(numpy_small, claim, 10) == want
            same_pruned += keyword_candidates(pruned, claim, 10) == want
            # hybrid search asks for 100 keyword candidates
            same_100 += keyword_candidates(numpy_small, claim, 100) == keyword_candidates(
                exact, claim, 100
            )
    n = len(claims)
    assert (same_numpy, same_small, same_pruned, same_100) == (n, n, n, n)
