"""store/reads.py: one-side searches, hits and stored vectors over any Store.

The contract suite runs these on every backend; here the edge cases on a real
LanceStore: a hit whose chunk is gone between the search and the row read is
dropped, unknown ids are absent, and a document's vectors are keyed by content
hash so a changed file reuses the vectors of its unchanged chunks.
"""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragline.store.base import CandidateQuery, Candidates
from ragline.store.lance import LanceStore
from ragline.store.reads import (
    document_vectors,
    keyword_candidates,
    keyword_search,
    vector_candidates,
    vector_search,
    vectors_for,
)

_contract = runpy.run_path(str(Path(__file__).with_name("contract.py")))
DIM: int = _contract["DIM"]
PASSAGES: list[str] = _contract["PASSAGES"]
unit = _contract["unit"]
write = _contract["write"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LanceStore]:
    s = LanceStore(tmp_path / "index", dimension=DIM)
    yield s
    s.close()


class DeletesAfterSearch:
    """A real store whose document ``doc`` is deleted right after each candidate
    search, before the caller reads the rows (a concurrent ingest)."""

    def __init__(self, inner: LanceStore, doc: str) -> None:
        self.inner, self.doc = inner, doc

    def candidates(self, query: CandidateQuery) -> Candidates:
        found = self.inner.candidates(query)
        self.inner.delete_document(self.doc)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_one_side_rankings_and_hits_agree(store: LanceStore) -> None:
    _, vecs = write(store, "a", PASSAGES[:3], seed=1)
    pairs = vector_candidates(store, vecs[1], 3)
    assert pairs[0][0] == "acme/a/1" and pairs[0][1] == pytest.approx(1.0, abs=1e-5)
    hits = vector_search(store, vecs[1], 3)
    assert [(h.chunk.id, h.score) for h in hits] == pairs
    assert all(h.vector_score == h.score and h.keyword_score is None for h in hits)
    kpairs = keyword_candidates(store, "gradient", 3)
    khits = keyword_search(store, "gradient", 3)
    assert kpairs and [(h.chunk.id, h.score) for h in khits] == kpairs
    assert all(h.keyword_score == h.score and h.vector_score is None for h in khits)


def test_a_hit_deleted_after_its_search_is_dropped(store: LanceStore) -> None:
    write(store, "a", PASSAGES[:2], seed=1)
    write(store, "b", PASSAGES[2:4], seed=2)
    racing = DeletesAfterSearch(store, "b")
    q = unit(np.random.default_rng(5), 1)[0]
    pairs = vector_candidates(store, q, 4)
    assert {i.split("/")[1] for i, _ in pairs} == {"a", "b"}  # both were candidates
    hits = vector_search(racing, q, 4)  # type: ignore[arg-type]
    assert {h.chunk.doc_id for h in hits} == {"a"}


def test_vectors_by_id_and_by_document(store: LanceStore) -> None:
    chunks, vecs = write(store, "a", PASSAGES[:3], seed=1)
    got = vectors_for(store, [chunks[2].id, "missing", chunks[0].id])
    assert set(got) == {chunks[0].id, chunks[2].id}
    np.testing.assert_allclose(got[chunks[2].id], vecs[2], rtol=1e-6, atol=1e-6)
    assert vectors_for(store, []) == {}
    by_hash = document_vectors(store, "a")
    assert set(by_hash) == {c.content_hash for c in chunks}
    for c, v in zip(chunks, vecs, strict=True):
        np.testing.assert_allclose(by_hash[c.content_hash], v, rtol=1e-6, atol=1e-6)
    assert document_vectors(store, "nope") == {}
