"""What a sync mends in the store before it writes: chunks left without a record
(removed) and files with a malformed stored chunk (indexed again)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol, TypeVar

from ragline.ingest.discover import escaped
from ragline.ingest.plan import in_scope, relative
from ragline.ingest.report import FileFailure, IngestReport
from ragline.store.base import IndexStore, chunk_problem
from ragline.types import DocumentRecord

_T = TypeVar("_T")

#: Prefix put, for this run only, on the recorded hash of a file with a malformed
#: stored chunk (a missing or wrong-typed field, after a crash or a hand edit): it
#: matches no file's hash, so the run indexes the file again and replaces the chunk.
MALFORMED_HASH = "malformed:"


class _StoreRead(Protocol):
    """A read of the store, retried as the sync retries its reads."""

    def __call__(self, fn: Callable[[], _T], /) -> _T: ...


def remove_orphans(
    store: IndexStore,
    read: _StoreRead,
    report: IngestReport,
    tenant: str,
    scope: Callable[[str], bool],
) -> None:
    """Delete chunks in ``scope`` whose document has no record.

    ``replace_documents`` writes a batch's chunks, then its records: a crash in
    between leaves chunks that no record lists. While the file exists the next
    run redoes it; once it is deleted, nothing would ever remove them. They
    exist only if the tenant's chunk count differs from the sum of its records'
    counts (one count query per run); only then are the chunks scanned.
    Done before anything is written, so a file still on disk is simply indexed
    again in this run."""
    records = read(lambda: store.documents(tenant))
    expected = sum(r.chunk_count for r in records)
    if read(lambda: store.info({"tenant": tenant}).chunks) == expected:
        return
    t0 = time.perf_counter()
    known = {r.doc_id for r in records}
    orphans: dict[str, str] = {}
    for chunks, _ in store.iter_chunks():
        for c in chunks:
            if c.tenant == tenant and c.doc_id not in known and scope(c.source):
                orphans.setdefault(c.doc_id, c.source)
    for doc_id, source in sorted(orphans.items(), key=lambda kv: kv[1]):
        store.delete_document(doc_id)
        report.orphans_removed.append(escaped(source))
    report.add_stage("orphans", time.perf_counter() - t0)


def find_malformed(
    store: IndexStore, indexed: dict[str, DocumentRecord], report: IngestReport, base: Path
) -> dict[str, list[str]]:
    """Files with a malformed stored chunk (``chunk_problem``: a field missing or
    of the wrong type), source → chunk ids. Their records in ``indexed`` are
    marked changed, so this run indexes them again though their hash is the
    same, and a warning names each. One read of every stored chunk (the caller
    checks ``RAGLINE_INGEST_REPAIR_MALFORMED``); a chunk whose document id and
    source are both broken matches no file and is left for ``ragline status``."""
    if not indexed:
        return {}
    t0 = time.perf_counter()
    by_doc = {r.doc_id: source for source, r in indexed.items()}
    found: dict[str, list[str]] = {}
    problems: dict[str, str] = {}
    for chunks, _ in store.iter_chunks():
        for c in chunks:
            problem = chunk_problem(c)
            if problem is None:
                continue
            source = by_doc.get(c.doc_id) if isinstance(c.doc_id, str) else None
            if source is None and isinstance(c.source, str) and c.source in indexed:
                source = c.source
            if source is not None:
                found.setdefault(source, []).append(str(c.id))
                problems.setdefault(source, problem)
    for source, ids in sorted(found.items()):
        rec = indexed[source]
        indexed[source] = replace(rec, file_hash=MALFORMED_HASH + rec.file_hash)
        report.warnings.append(
            FileFailure(
                escaped(relative(Path(source), base) if in_scope(source, base) else source),
                f"{len(ids)} stored chunk(s) malformed ({problems[source]}); "
                "the file is indexed again",
            )
        )
    report.add_stage("check", time.perf_counter() - t0)
    return found
