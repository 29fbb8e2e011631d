"""`ragline migrate` and STORE_URL: copy an index between stores and prove the copy;
every command works on the store STORE_URL names."""

from __future__ import annotations

import json
import shutil
import time
from itertools import count
from pathlib import Path

import numpy as np
import psycopg
import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.embed.base import ModelFingerprint
from ragline.store.base import DocumentWrite, StoreError
from ragline.store.lance import LanceStore
from ragline.store.migrate import TargetNotEmptyError, migrate_index, results_agree
from ragline.store.postgres import PostgresStore
from ragline.types import Chunk, DocumentRecord, Hit

runner = CliRunner()
DIM = 16
FP = ModelFingerprint(name="migrate-test", dimension=DIM, digest="b" * 64)
WORDS = [
    "gradient",
    "descent",
    "attention",
    "dropout",
    "convolution",
    "kernel",
    "tensor",
    "batch",
    "norm",
    "layer",
    "optimizer",
    "momentum",
    "recurrent",
    "embedding",
    "softmax",
    "loss",
    "label",
    "sample",
    "network",
    "weight",
]
_names = count()
CHUNKS = sum(d % 7 for d in range(24))  # make_docs' chunk count


def schema_name() -> str:
    return f"t_mig_{next(_names)}_{time.monotonic_ns() % 10**8}"


def make_docs(rng: np.random.Generator) -> list[DocumentWrite]:
    """Two tenants, documents of 0–6 chunks with word-salad text and unit vectors."""
    items = []
    for d in range(24):
        tenant = "acme" if d % 3 else "globex"
        doc = f"{tenant}-doc{d}"
        n = d % 7
        chunks = [
            Chunk(
                id=f"{doc}/{i}",
                doc_id=doc,
                tenant=tenant,
                source=f"/docs/{doc}.md",
                title=f"Document {d} " + " ".join(rng.choice(WORDS, 2)),
                chapter=f"ch{d % 4}",
                section="Part",
                heading_path=(f"Document {d}", "Part"),
                url=f"file:///docs/{doc}.md",
                anchor="part",
                chunk_index=i,
                start_char=i * 100,
                end_char=i * 100 + 90,
                token_count=20,
                word_count=15,
                has_code=i % 2 == 0,
                has_equations=False,
                content_hash=f"{doc}-{i}",
                created_at="2024-01-01T00:00:00Z",
                text=" ".join(rng.choice(WORDS, 15)),
                metadata={"k": i},
            )
            for i in range(n)
        ]
        vecs = rng.standard_normal((n, DIM)).astype(np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
        record = DocumentRecord(
            doc, tenant, f"/docs/{doc}.md", f"f{d}", n, 20 * n, f"ch{d % 4}", "t", "md", "now"
        )
        items.append(DocumentWrite(record, chunks, vecs))
    return items


@pytest.fixture
def lance_index(tmp_path: Path) -> Path:
    path = tmp_path / "index" / "lance"
    store = LanceStore(path, dimension=DIM)
    store.fingerprint(FP)
    items = make_docs(np.random.default_rng(4))
    store.replace_documents(items[:10])
    store.replace_documents(items[10:])
    store.optimize()
    store.close()
    return path


def test_results_agree_allows_ties_but_not_other_hits() -> None:
    def hits(*pairs: tuple[str, float]) -> list[Hit]:
        out = []
        for cid, score in pairs:
            c = Chunk(
                cid, "d", "t", "s", "", "", "", (), "", "", 0, 0, 0, 0, 0, False, False, "", "", ""
            )
            out.append(Hit(chunk=c, score=score, keyword_score=score))
        return out

    a = hits(("x", 2.0), ("y", 2.0), ("z", 1.0))
    assert results_agree(a, hits(("y", 2.0), ("x", 2.0), ("z", 1.0)), "keyword_score", 0.8)
    assert not results_agree(a, hits(("q", 1.5), ("x", 1.0)), "keyword_score", 0.8)
    assert not results_agree(a, [], "keyword_score", 0.8)
    # a tie at the cut: other chunks with the same scores are the same ranking
    tied = hits(("x", 3.0), ("p", 1.0), ("q", 1.0), ("r", 1.0))
    assert results_agree(
        tied, hits(("x", 3.0), ("s", 1.0), ("t", 1.0), ("u", 1.0)), "keyword_score", 0.8
    )
    assert not results_agree(
        tied, hits(("x", 3.0), ("s", 1.0), ("t", 0.9), ("u", 0.9)), "keyword_score", 0.8
    )


def test_lance_to_postgres_copies_everything_and_verifies(lance_index: Path, pg_url: str) -> None:
    source = LanceStore.open(lance_index)
    target = PostgresStore(pg_url, dimension=DIM, schema=schema_name())
    try:
        report = migrate_index(source, target, sample=12, k=5)
        assert report.ok, report.problems
        assert report.documents == 24 and report.chunks == source.info().chunks == CHUNKS
        assert set(report.tenants) == {"acme", "globex"}
        assert all(sd == td and sc == tc for sd, td, sc, tc in report.tenants.values())
        assert len(report.searches) == 24 and all(s.agrees for s in report.searches)
        assert target.fingerprint() == FP
        # every field and vector came over unchanged
        src = {c.id: (c, v) for b, vs in source.iter_chunks() for c, v in zip(b, vs, strict=True)}
        dst = {c.id: (c, v) for b, vs in target.iter_chunks() for c, v in zip(b, vs, strict=True)}
        assert src.keys() == dst.keys()
        for cid, (c, v) in src.items():
            assert dst[cid][0] == c
            np.testing.assert_allclose(dst[cid][1], v, rtol=1e-6)
        assert [(d.doc_id, d.chunk_count) for d in target.documents()] == [
            (d.doc_id, d.chunk_count) for d in source.documents()
        ]

        # a non-empty target is refused, --force replaces it
        with pytest.raises(TargetNotEmptyError, match="--force"):
            migrate_index(source, target)
        assert migrate_index(source, target, force=True, sample=4).ok
        assert target.info().chunks == CHUNKS
    finally:
        source.close()
        target.close()


def test_an_empty_source_is_refused(tmp_path: Path, pg_url: str) -> None:
    source = LanceStore(tmp_path / "empty", dimension=DIM)
    target = PostgresStore(pg_url, dimension=DIM, schema=schema_name())
    try:
        with pytest.raises(StoreError, match="empty"):
            migrate_index(source, target)
    finally:
        source.close()
        target.close()


@pytest.mark.slow
def test_store_url_selects_postgres_for_every_command(
    pg_url: str, tides: Path, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("index.md", "gauges.md", "tools.md"):
        shutil.copy(tides / name, corpus / name)
    schema = schema_name()
    env = {"STORE_URL": f"{pg_url}?schema={schema}", "RAGLINE_INDEX_DIR": str(tmp_path / "idx")}

    result = runner.invoke(app, ["ingest", str(corpus), "--json"], env=env)
    assert result.exit_code == 0, result.output
    chunks = json.loads(result.stdout)["index_chunks"]
    assert chunks > 0
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {schema}.ragline_chunks").fetchone()
    assert row is not None and row[0] == chunks  # the chunks are in PostgreSQL
    assert not (tmp_path / "idx" / "lance").exists()  # and nowhere else

    status = runner.invoke(app, ["status", "--json"], env=env)
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["chunks"] == chunks
    found = runner.invoke(app, ["search", "tidekit package", "--mode", "bm25", "--json"], env=env)
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["hits"]

    # migrate from PostgreSQL to an embedded index, then refuse a second copy
    target = tmp_path / "copy"
    moved = runner.invoke(app, ["migrate", "--to", f"lance://{target}", "--json"], env=env)
    assert moved.exit_code == 0, moved.output
    report = json.loads(moved.stdout)
    assert report["ok"] and report["chunks"] == chunks
    assert report["searches_agreeing"] == report["searches_checked"] > 0
    again = runner.invoke(app, ["migrate", "--to", f"lance://{target}"], env=env)
    assert again.exit_code == 2 and "--force" in again.output


@pytest.mark.parametrize("kind", ["chroma", "chroma_local", "falkordb"])
def test_migrate_to_chroma_and_falkordb(
    kind: str, lance_index: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`ragline migrate --to chroma://… | chroma+local://… | falkordb://…` copies the
    index and proves the copy, like the other targets; a second copy is refused."""
    name = schema_name()
    if kind == "chroma":
        url = str(request.getfixturevalue("chroma_url")).replace("http://", "chroma://")
        target = f"{url}/{name}"
    elif kind == "chroma_local":
        target = f"chroma+local://{tmp_path / 'chroma'}"
    else:
        target = f"{request.getfixturevalue('falkordb_url')}/{name}"
    env = {"RAGLINE_INDEX_DIR": str(lance_index.parent), "STORE_URL": ""}
    moved = runner.invoke(app, ["migrate", "--to", target, "--json"], env=env)
    assert moved.exit_code == 0, moved.output
    report = json.loads(moved.stdout)
    assert report["ok"] and report["chunks"] == CHUNKS
    assert report["searches_agreeing"] == report["searches_checked"] > 0
    again = runner.invoke(app, ["migrate", "--to", target], env=env)
    assert again.exit_code == 2 and "--force" in again.output
