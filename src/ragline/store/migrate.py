"""Copy an index to another store (``ragline migrate --to …``) and prove the copy.

Everything goes through the Store protocol, so any store can be copied to any
other: chunks stream out with ``iter_chunks`` and are regrouped per document
(documents are written whole, with their records, through
``replace_documents``: the same path an ingest takes, so the target's BM25
statistics and indexes are built the usual way), then the model fingerprint is
recorded and the target optimised. Verification, afterwards: per tenant the
document and chunk counts must be equal, and a sample of searches (each sampled
chunk's own vector, and a few words of its text as a BM25 query, in its tenant)
must return the same top hit on both sides (ties in score count as the same)
and overlap at least ``min_overlap`` in their top-k.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragline.embed.base import Vectors
from ragline.settings import Settings
from ragline.store.base import DocumentWrite, IndexStore, StoreError
from ragline.store.factory import open_store, store_location
from ragline.store.reads import keyword_search, vector_search
from ragline.store.url import StoreLocation
from ragline.types import Chunk, DocumentRecord, Filters, Hit

#: progress(chunks_copied, chunks_total)
MigrateProgress = Callable[[int, int], None]
#: Words of a sampled chunk's text used as its BM25 probe query.
PROBE_WORDS = 8
#: Scores closer than this (relative) are ties: their order may differ between stores.
TIE_TOLERANCE = 1e-4
#: Vector size assumed for a source store that does not exist (it is refused as empty).
_DEFAULT_DIMENSION = 384


class TargetNotEmptyError(StoreError):
    """The target store already holds an index (use ``force`` to replace it)."""


@dataclass(slots=True)
class SearchCheck:
    """One sampled search run on both stores."""

    kind: str  # "vector" | "bm25"
    query: str  # the sampled chunk id (vector) or the query text (bm25)
    tenant: str
    source_top: list[str]
    target_top: list[str]
    agrees: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "query": self.query,
            "tenant": self.tenant,
            "source_top": self.source_top,
            "target_top": self.target_top,
            "agrees": self.agrees,
        }


@dataclass(slots=True)
class MigrationReport:
    source: str
    target: str
    documents: int = 0
    chunks: int = 0
    #: tenant → (source documents, target documents, source chunks, target chunks)
    tenants: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    searches: list[SearchCheck] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "documents": self.documents,
            "chunks": self.chunks,
            "tenants": {
                t: {
                    "source_documents": sd,
                    "target_documents": td,
                    "source_chunks": sc,
                    "target_chunks": tc,
                }
                for t, (sd, td, sc, tc) in sorted(self.tenants.items())
            },
            "searches_checked": len(self.searches),
            "searches_agreeing": sum(s.agrees for s in self.searches),
            "disagreements": [s.to_dict() for s in self.searches if not s.agrees],
            "problems": self.problems,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
        }


# --------------------------------------------------------------------- pure


def results_agree(a: Sequence[Hit], b: Sequence[Hit], score: str, min_overlap: float) -> bool:
    """Same top hit (or tied top scores) and top-k id overlap ≥ ``min_overlap``."""
    if not a and not b:
        return True
    if not a or not b:
        return False
    sa = getattr(a[0], score) or 0.0
    sb = getattr(b[0], score) or 0.0
    top_same = a[0].chunk.id == b[0].chunk.id or abs(sa - sb) <= TIE_TOLERANCE * max(
        abs(sa), abs(sb), 1e-12
    )
    ids_a = {h.chunk.id for h in a}
    ids_b = {h.chunk.id for h in b}
    if top_same and len(ids_a & ids_b) >= min_overlap * min(len(ids_a), len(ids_b)):
        return True
    # Equal scores position by position: the same ranking, only ties (e.g. several
    # chunks of one document at the cut) ordered differently.
    return len(a) == len(b) and all(
        _close(getattr(x, score) or 0.0, getattr(y, score) or 0.0)
        for x, y in zip(a, b, strict=True)
    )


def _close(x: float, y: float) -> bool:
    return abs(x - y) <= TIE_TOLERANCE * max(abs(x), abs(y), 1e-12)


def probe_query(chunk: Chunk) -> str:
    """A BM25 probe for a chunk: the first words of its text."""
    return " ".join(chunk.text.split()[:PROBE_WORDS])


# ------------------------------------------------------------------ copying


class _DocumentBuffer:
    """Chunks streamed in any order, released per document once it is complete."""

    def __init__(self, records: dict[str, DocumentRecord]) -> None:
        self.records = records
        self.pending: dict[str, tuple[list[Chunk], list[Vectors]]] = {}

    def add(self, chunk: Chunk, vector: Vectors) -> DocumentWrite | None:
        chunks, vectors = self.pending.setdefault(chunk.doc_id, ([], []))
        chunks.append(chunk)
        vectors.append(vector)
        record = self.records.get(chunk.doc_id)
        if record is not None and len(chunks) >= record.chunk_count:
            return self._release(chunk.doc_id)
        return None

    def _release(self, doc_id: str) -> DocumentWrite:
        chunks, vectors = self.pending.pop(doc_id)
        order = sorted(range(len(chunks)), key=lambda i: chunks[i].chunk_index)
        return DocumentWrite(
            self.records[doc_id],
            [chunks[i] for i in order],
            np.stack([vectors[i] for i in order]),
        )

    def rest(self) -> tuple[list[DocumentWrite], list[str]]:
        """Documents whose chunk count differed from their record, and orphan doc ids."""
        writes, orphans = [], []
        for doc_id in list(self.pending):
            if doc_id in self.records:
                writes.append(self._release(doc_id))
            else:
                orphans.append(doc_id)
        return writes, orphans


def migrate_index(
    source: IndexStore,
    target: IndexStore,
    *,
    source_name: str = "source",
    target_name: str = "target",
    force: bool = False,
    batch_chunks: int = 512,
    sample: int = 20,
    k: int = 10,
    min_overlap: float = 0.8,
    progress: MigrateProgress | None = None,
) -> MigrationReport:
    """Copy every document, chunk, vector and the model fingerprint from ``source``
    to ``target``, then verify (see the module docstring). A non-empty target is
    refused unless ``force``, which first deletes what the target holds."""
    started = time.perf_counter()
    report = MigrationReport(source_name, target_name)
    fingerprint = source.fingerprint()
    records = {r.doc_id: r for r in source.documents(None)}
    total = source.info(None).chunks
    if fingerprint is None and not records and total == 0:
        raise StoreError(f"{source_name}: the index is empty, there is nothing to migrate")
    existing = target.documents(None)
    held = target.info(None).chunks
    if existing or held:
        if not force:
            raise TargetNotEmptyError(
                f"{target_name} already holds {len(existing)} document(s) and {held} chunk(s); "
                "pass --force to replace them"
            )
        for rec in existing:
            target.delete_document(rec.doc_id)
        if target.info(None).chunks:
            raise StoreError(f"{target_name}: chunks without a document record remain")
    if fingerprint is not None:
        target.fingerprint(fingerprint)

    buffer = _DocumentBuffer(records)
    batch: list[DocumentWrite] = []
    batch_size = 0
    copied = 0
    stride = max(1, total // max(1, sample)) if sample else 0
    samples: list[tuple[Chunk, Vectors]] = []

    def flush() -> None:
        nonlocal batch, batch_size
        if batch:
            target.replace_documents(batch)
            batch, batch_size = [], 0

    def queue(item: DocumentWrite) -> None:
        nonlocal batch_size
        batch.append(item)
        batch_size += len(item.chunks)
        if batch_size >= batch_chunks:
            flush()

    for rec in records.values():
        if rec.chunk_count == 0:
            queue(DocumentWrite(rec, [], np.zeros((0, target_dimension(target)), np.float32)))
    for chunks, vectors in source.iter_chunks(batch_chunks):
        for chunk, vector in zip(chunks, vectors, strict=True):
            if stride and copied % stride == 0 and len(samples) < sample:
                samples.append((chunk, vector))
            copied += 1
            done = buffer.add(chunk, vector)
            if done is not None:
                queue(done)
        if progress:
            progress(copied, total)
    leftovers, orphans = buffer.rest()
    for item in leftovers:
        report.problems.append(
            f"document {item.record.doc_id} ({item.record.source}): record says "
            f"{item.record.chunk_count} chunks, the index holds {len(item.chunks)}; copied as is"
        )
        queue(item)
    flush()
    for doc_id in orphans:
        report.problems.append(f"chunks of document {doc_id} have no document record: not copied")
    target.optimize()
    report.documents = len(records)
    report.chunks = copied

    _verify_counts(source, target, records, report)
    for chunk, vector in samples:
        scope: Filters = {"tenant": chunk.tenant}
        a = vector_search(source, vector, k, scope)
        b = vector_search(target, vector, k, scope)
        report.searches.append(
            SearchCheck(
                "vector",
                chunk.id,
                chunk.tenant,
                [h.chunk.id for h in a],
                [h.chunk.id for h in b],
                results_agree(a, b, "vector_score", min_overlap),
            )
        )
        query = probe_query(chunk)
        a = keyword_search(source, query, k, scope)
        b = keyword_search(target, query, k, scope)
        report.searches.append(
            SearchCheck(
                "bm25",
                query,
                chunk.tenant,
                [h.chunk.id for h in a],
                [h.chunk.id for h in b],
                results_agree(a, b, "keyword_score", min_overlap),
            )
        )
    bad = [s for s in report.searches if not s.agrees]
    if bad:
        report.problems.append(
            f"{len(bad)} of {len(report.searches)} sampled searches differ "
            f"(first: {bad[0].kind} {bad[0].query!r})"
        )
    report.seconds = time.perf_counter() - started
    return report


def target_dimension(store: IndexStore) -> int:
    """The vector size a store holds (its fingerprint's, else the one it was opened with)."""
    fp = store.fingerprint()
    return fp.dimension if fp is not None else store.info().dimension


def _verify_counts(
    source: IndexStore,
    target: IndexStore,
    records: dict[str, DocumentRecord],
    report: MigrationReport,
) -> None:
    tenants = sorted({r.tenant for r in records.values()} | {r.tenant for r in target.documents()})
    for tenant in tenants:
        sd = sum(1 for r in records.values() if r.tenant == tenant)
        td = len(target.documents(tenant))
        sc = source.info({"tenant": tenant}).chunks
        tc = target.info({"tenant": tenant}).chunks
        report.tenants[tenant] = (sd, td, sc, tc)
        if (sd, sc) != (td, tc):
            report.problems.append(
                f"tenant {tenant!r}: source has {sd} documents / {sc} chunks, target {td} / {tc}"
            )
    if source.fingerprint() != target.fingerprint():
        report.problems.append("the model fingerprints differ")


def open_existing(location: StoreLocation, settings: Settings) -> IndexStore:
    """Open the index at ``location`` with the dimension it was built with."""
    if location.kind == "lance":
        from ragline.store.lance import LanceStore
        from ragline.store.lance_tables import META_FILE

        if not (Path(location.target) / META_FILE).is_file():
            raise StoreError(f"{location.describe()}: no ragline index there")
        return LanceStore.open(
            Path(location.target),
            ann_min_rows=settings.ann_min_rows,
            ann_ef=settings.ann_ef,
            ann_nprobes=settings.ann_nprobes,
            ann_refine_factor=settings.ann_refine_factor,
        )
    # PostgreSQL and Qdrant read their stored dimension when they open; this one only
    # shapes a store that did not exist, which migrate_index then refuses as empty.
    return open_store(location, settings, settings.embed_dimension or _DEFAULT_DIMENSION)


def migrate_to_url(
    settings: Settings,
    url: str,
    *,
    force: bool = False,
    sample: int = 20,
    progress: MigrateProgress | None = None,
) -> MigrationReport:
    """``ragline migrate``: copy the configured index to the store ``url`` names."""
    source_loc = store_location(settings)
    target_loc = store_location(settings, url)
    if source_loc == target_loc:
        raise StoreError(f"--to {target_loc.describe()} is the configured index itself")
    source = open_existing(source_loc, settings)
    try:
        fp = source.fingerprint()
        dimension = fp.dimension if fp else target_dimension(source)
        target = open_store(target_loc, settings, dimension)
        try:
            return migrate_index(
                source,
                target,
                source_name=source_loc.describe(),
                target_name=target_loc.describe(),
                force=force,
                batch_chunks=settings.write_batch_chunks,
                sample=sample,
                k=settings.retrieval_top_k,
                progress=progress,
            )
        finally:
            target.close()
    finally:
        source.close()
