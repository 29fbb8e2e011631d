"""Incremental, idempotent sync of a folder into a store.

How a run stays cheap and safe:

* every file is hashed first; a file whose hash matches its record is skipped
  without parsing (this is what makes a re-run of an unchanged corpus fast);
* a changed file is re-chunked, and chunks whose content hash is already stored
  reuse their vector, so only changed chunks are embedded;
* chunks of several files are embedded together in full batches and written in
  one atomic commit per batch, then the files' records are written; a crash at
  any point leaves the previous chunks or the new ones, never both, and files
  without an up-to-date record are simply redone by the next run;
* a file that fails (bad encoding, broken front matter, too big…) fails alone:
  it is reported with its reason and line, and its previous chunks stay indexed;
* a batch write the store refuses (timeout, lost connection) is retried with
  backoff; a batch that still fails is reported under its files and the run goes
  on (those files have no new record, so the next run redoes them);
* a chunk the embedder cannot embed is left out alone (the batch is halved until
  it is found) and named in the report's warnings; its file is recorded as
  partial, so the next run tries that chunk again;
* records of files that vanished from disk are deleted with their chunks;
* chunks left without a record (a crash between a batch's two writes, then the
  file deleted) are found when the tenant's chunk count disagrees with its
  records, and removed, so nothing unlisted stays searchable.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np

from ragline.embed.base import Embedder, EmbeddingError, Vectors
from ragline.embed.choice import evenly_spaced
from ragline.ingest.budget import Budget, run_budgeted
from ragline.ingest.chunk import Chunker
from ragline.ingest.discover import chapter_of, discover, escaped, resolved
from ragline.ingest.errors import IngestError
from ragline.ingest.failures import FailureMemory, Remembered
from ragline.ingest.hygiene import missing_metadata, skipped_heading_levels
from ragline.ingest.ignore import rules_for
from ragline.ingest.parse import OcrOptions, ParseLimits, parse_file
from ragline.ingest.records import build_chunks, doc_id_for
from ragline.ingest.report import ChapterCount, FileFailure, IngestReport
from ragline.settings import Settings
from ragline.store.base import (
    MALFORMED_CHUNKS,
    DocumentWrite,
    IndexStore,
    ModelMismatchError,
    StoreError,
    check_model,
    chunk_problem,
)
from ragline.store.reads import document_vectors
from ragline.store.retrying import call_with_retry
from ragline.text.language import DEFAULT_LANGUAGE
from ragline.types import Chunk, DocumentRecord, ParsedDocument


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """Where a sync stands, counted in what costs time: chunks embedded out of the
    chunks to embed. That total is only known as files are chunked, so it grows
    with ``files_done``; rate and ETA come from the embedding speed measured so far
    (bytes read said nothing: reading is fast, embedding is the wait)."""

    files_done: int  # files chunked (or failed) so far
    files_total: int  # files to index this run
    chunks_embedded: int
    chunks_to_embed: int  # known so far
    embed_seconds: float  # time spent in the embedder so far
    current: str  # the file handled last

    @property
    def rate(self) -> float | None:
        """Chunks embedded per second so far; None before the first batch."""
        if not self.chunks_embedded or self.embed_seconds <= 0:
            return None
        return self.chunks_embedded / self.embed_seconds

    @property
    def eta_seconds(self) -> float | None:
        """Embedding time left for the chunks known so far, at the measured rate."""
        rate = self.rate
        return None if rate is None else (self.chunks_to_embed - self.chunks_embedded) / rate


#: progress(event): called after each file is chunked and each batch is embedded.
ProgressCallback = Callable[[IngestProgress], None]


@dataclass(slots=True)
class _Tally:
    """The running counts behind :class:`IngestProgress`, and whom to tell."""

    callback: ProgressCallback | None
    files_total: int
    files_done: int = 0
    chunks_embedded: int = 0
    chunks_to_embed: int = 0
    embed_seconds: float = 0.0
    current: str = ""

    def tell(self) -> None:
        if self.callback is not None:
            self.callback(
                IngestProgress(
                    self.files_done,
                    self.files_total,
                    self.chunks_embedded,
                    self.chunks_to_embed,
                    self.embed_seconds,
                    self.current,
                )
            )


#: Prefix of the recorded hash of a file written without some of its chunks: it
#: matches no file's hash, so the next run indexes the file again (reusing the
#: stored vectors) and tries the left-out chunks once more.
PARTIAL_HASH = "partial:"

_T = TypeVar("_T")

#: Prefix put, for this run only, on the recorded hash of a file with a malformed
#: stored chunk (a missing or wrong-typed field, after a crash or a hand edit): it
#: matches no file's hash, so the run indexes the file again and replaces the chunk.
MALFORMED_HASH = "malformed:"

#: choose(languages): the embedder a new index is built with, given the chunk
#: languages (chunks per ISO code) of its sampled files, and why, for the report
#: (``RAGLINE_EMBEDDER=auto``; see :mod:`ragline.embed.choice`).
ChooseEmbedder = Callable[[Mapping[str, int]], tuple[Embedder, str]]


@dataclass(frozen=True, slots=True)
class FileState:
    path: Path
    source: str  # canonical absolute POSIX path: the document's identity
    size: int
    file_hash: str


@dataclass(frozen=True, slots=True)
class SourcedDocument:
    """A document that is not a file (a fetched web page): its identity, the hash of
    its content, and how to parse it (called only when the content changed)."""

    source: str
    content_hash: str
    size: int
    parse: Callable[[], ParsedDocument]
    chapter: str = ""


@dataclass(slots=True)
class SyncPlan:
    """What a run will do, decided from hashes alone (pure; see :func:`plan_sync`)."""

    to_index: list[FileState] = field(default_factory=list)
    unchanged: list[FileState] = field(default_factory=list)
    to_delete: list[DocumentRecord] = field(default_factory=list)


def plan_sync(current: Sequence[FileState], indexed: dict[str, DocumentRecord]) -> SyncPlan:
    """Split files into new-or-changed and unchanged; records whose file is gone
    are to delete. ``indexed`` holds only the records under the run's root."""
    plan = SyncPlan()
    seen: set[str] = set()
    for f in current:
        seen.add(f.source)
        rec = indexed.get(f.source)
        if rec is not None and rec.file_hash == f.file_hash:
            plan.unchanged.append(f)
        else:
            plan.to_index.append(f)
    plan.to_delete = [r for s, r in sorted(indexed.items()) if s not in seen]
    return plan


def no_documents_hint(extensions: Sequence[str], excluded: Sequence[str]) -> str:
    """Why a run found nothing to read: which files it looks for and what it skips,
    so an empty or wrong folder is not mistaken for a successful ingest."""
    left_out = (
        f"; {len(excluded)} path(s) left out by --exclude / .raglineignore / RAGLINE_EXCLUDE"
        if excluded
        else ""
    )
    return (
        f"no documents found: ragline reads {' '.join(extensions)} files (RAGLINE_EXTENSIONS); "
        f"hidden files and folders are skipped{left_out}"
    )


def in_scope(source: str, root: Path) -> bool:
    """Is an indexed path under this run's root (so its absence means deletion)?"""
    r = root.as_posix()
    return source == r or source.startswith(r.rstrip("/") + "/")


def _relative(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _hash_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Stopped(Exception):
    """The run was asked to stop (Ctrl-C) while an embedding call was running."""


@dataclass(slots=True)
class _Pending:
    record: DocumentRecord
    chunks: list[Chunk]
    vectors: list[np.ndarray | None]
    rel: str
    dropped: int = 0  # chunks left out because the embedder failed on them


@dataclass(slots=True)
class _EmbedRun:
    """What the halving of one batch found: the chunks that failed alone (keyed
    by file id and chunk position, with the error), and whether the embedder
    looks down (two chunks failed alone before any call succeeded), in which case
    the halving stops and the files behind the failures fail whole."""

    rejected: dict[tuple[int, int], str] = field(default_factory=dict)
    succeeded: bool = False
    down: str | None = None


#: A document prepared ahead (to decide the embedder), with the report of its steps.
_Prepared = dict[str, tuple[_Pending, IngestReport]]


class Indexer:
    """Runs a sync of one folder (or file) for one tenant.

    With ``choose``, an index that records no model yet is given the embedder
    ``choose`` picks from the languages of an evenly spread sample of the files to
    index (prepared first, and not prepared again); an index that records one keeps
    ``embedder``, which must then be that model."""

    def __init__(
        self,
        store: IndexStore,
        embedder: Embedder,
        settings: Settings,
        chunker: Chunker,
        *,
        choose: ChooseEmbedder | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """``stop``, once set (the command line's Ctrl-C), ends the run early: the
        embedding call under way is abandoned, the files whose chunks are all
        embedded are written, the others are left for the next run, and the
        report says ``interrupted``."""
        self.store = store
        self.stop = stop
        self.embedder = embedder
        self.settings = settings
        self.chunker = chunker
        self.choose = choose
        self._unrecorded = False  # chosen, but nothing sampled yet to record it for
        self._tally = _Tally(None, 0)

    def sync(
        self,
        root: Path,
        *,
        tenant: str | None = None,
        progress: ProgressCallback | None = None,
        title: str | None = None,
    ) -> IngestReport:
        """Bring the index in line with ``root`` (a folder or one file) for ``tenant``.

        ``title`` names a single file that has no title of its own (see
        :func:`~ragline.ingest.parse.parse_file`); it is ignored for folders.
        """
        started = time.perf_counter()
        tenant = tenant or self.settings.tenant
        root = resolved(root)
        base = root if root.is_dir() else root.parent
        default_title = None if root.is_dir() else title
        report = IngestReport(
            root=root.as_posix(), tenant=tenant, chunker=self.settings.chunker, model=""
        )
        choosing = self._choosing()
        if not choosing:
            self._record_model(report)
        self._remove_orphans(report, tenant, lambda source: in_scope(source, root))
        found = discover(root, self.settings.extensions, rules_for(root, self.settings.exclude))
        report.excluded = found.excluded
        paths = found.files
        report.files = len(paths) + len(found.rejected)
        if not report.files:
            hint = no_documents_hint(self.settings.extensions, found.excluded)
            report.warnings.append(FileFailure(root.as_posix(), hint))
        for path, problem in found.rejected:
            report.failed.append(FileFailure(escaped(_relative(path, base)), problem))
        indexed = {
            r.source: r
            for r in self._read(lambda: self.store.documents(tenant))
            if in_scope(r.source, root)
        }
        damaged = self._find_malformed(indexed, report, base)

        t0 = time.perf_counter()
        states: list[FileState] = []
        for path in paths:
            rel = path.relative_to(base).as_posix()
            try:
                size = path.stat().st_size
                if size > self.settings.max_file_bytes:
                    raise IngestError(
                        rel,
                        None,
                        f"file is {size:,} bytes, over the limit of "
                        f"{self.settings.max_file_bytes:,} (RAGLINE_MAX_FILE_BYTES)",
                    )
                states.append(
                    FileState(path, path.as_posix(), size, _hash_bytes(path.read_bytes()))
                )
            except IngestError as e:
                report.failed.append(FileFailure(rel, e.reason, e.line))
            except OSError as e:
                report.failed.append(FileFailure(rel, f"cannot read: {e.strerror or e}"))
        report.add_stage("hash", time.perf_counter() - t0)

        plan = plan_sync(states, indexed)
        report.skipped = [s.path.relative_to(base).as_posix() for s in plan.unchanged]
        memory = FailureMemory(self.settings.index_dir, tenant)
        # everything a parse depends on besides the file: a change retries its failures
        limits = (
            f"max_file_bytes={self.settings.max_file_bytes};"
            f"max_metadata_bytes={self.settings.max_metadata_bytes};"
            f"ocr={self.settings.ocr}:{self.settings.ocr_languages}:{self.settings.ocr_dpi};"
            f"pdf_tables={self.settings.pdf_tables};"
            f"{parse_limits(self.settings).key()};{Budget.of(self.settings)}"
        )
        prepared: _Prepared = {}
        if choosing:
            candidates = [
                (
                    s.source,
                    lambda scratch, s=s: self._prepare(
                        s,
                        s.path.relative_to(base).as_posix(),
                        base,
                        tenant,
                        indexed,
                        scratch,
                        default_title,
                    ),
                )
                for s in plan.to_index
                if memory.recall(s.source, s.file_hash, limits) is None
            ]
            prepared = self._choose_embedder(candidates, report)
        self._tally = tally = _Tally(progress, len(plan.to_index))
        pending: list[_Pending] = []
        pending_new = 0
        for state in plan.to_index:
            if self._stopping():
                break
            rel = state.path.relative_to(base).as_posix()
            known = memory.recall(state.source, state.file_hash, limits)
            if known is not None:  # failed before with this very content: not parsed again
                report.failed.append(FileFailure(rel, known.reason, known.line))
                tally.files_done += 1
                tally.current = rel
                tally.tell()
                continue
            item = None
            try:
                item = self._take(prepared, state.source, report) or self._prepare(
                    state, rel, base, tenant, indexed, report, default_title
                )
                memory.forget(state.source)
            except IngestError as e:
                report.failed.append(FileFailure(rel, e.reason, e.line))
                if not e.environment:  # a missing extra or Tesseract: try again next run
                    memory.remember(
                        state.source, Remembered(state.file_hash, limits, e.reason, e.line)
                    )
            except Exception as e:  # a parser bug must not stop the other files
                reason = f"{type(e).__name__}: {e}"
                report.failed.append(FileFailure(rel, reason))
                memory.remember(state.source, Remembered(state.file_hash, limits, reason, None))
            if item is not None:
                pending.append(item)
                new = sum(v is None for v in item.vectors)
                pending_new += new
                tally.chunks_to_embed += new
                if pending_new >= self.settings.write_batch_chunks:
                    self._flush(pending, report)
                    pending, pending_new = [], 0
            # one event per file, once it is handled (its batch written, if it closed one)
            tally.files_done += 1
            tally.current = rel
            tally.tell()
        self._flush(pending, report)
        memory.save()
        if damaged:
            done = {base / rel for rel in report.indexed}
            MALFORMED_CHUNKS.forget(
                i for source, ids in damaged.items() if Path(source) in done for i in ids
            )

        names = [
            Path(r.source).relative_to(base).as_posix() if in_scope(r.source, base) else r.source
            for r in plan.to_delete
        ]
        unchanged = [indexed[state.source] for state in plan.unchanged]
        return self._finish(report, plan.to_delete, names, unchanged, tenant, started)

    def sync_documents(
        self,
        docs: Sequence[SourcedDocument],
        *,
        root: str,
        tenant: str | None = None,
        unchanged: Collection[str] = (),
        keep: Collection[str] = (),
        delete_missing: bool = False,
        failed: Sequence[FileFailure] = (),
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Bring the index in line with documents that are not files (web pages).

        ``root`` is the scope (a URL prefix): with ``delete_missing``, records under it
        that are neither in ``docs`` nor in ``unchanged`` (sources known to be unchanged
        without their content, e.g. answered 304) nor in ``keep`` (sources whose fetch
        failed this time) are deleted. A document whose content
        hash matches its record is skipped without parsing, as files are.
        """
        started = time.perf_counter()
        tenant = tenant or self.settings.tenant
        report = IngestReport(root=root, tenant=tenant, chunker=self.settings.chunker, model="")
        choosing = self._choosing()
        if not choosing:
            self._record_model(report)
        report.failed.extend(failed)
        report.files = len(docs) + len(unchanged) + len(failed)
        self._remove_orphans(report, tenant, lambda source: source.startswith(root))
        indexed = {r.source: r for r in self.store.documents(tenant) if r.source.startswith(root)}
        kept = [indexed[s] for s in sorted(set(unchanged)) if s in indexed]
        prepared: _Prepared = {}
        if choosing:
            candidates = [
                (d.source, lambda scratch, d=d: self._prepare_doc(d, tenant, indexed, scratch))
                for d in docs
                if not (d.source in indexed and indexed[d.source].file_hash == d.content_hash)
            ]
            prepared = self._choose_embedder(candidates, report)
        self._tally = tally = _Tally(progress, len(docs))
        pending: list[_Pending] = []
        pending_new = 0
        for d in docs:
            if self._stopping():
                break
            rec = indexed.get(d.source)
            if rec is not None and rec.file_hash == d.content_hash:
                kept.append(rec)
            else:
                try:
                    item = self._take(prepared, d.source, report) or self._prepare_doc(
                        d, tenant, indexed, report
                    )
                except IngestError as e:
                    report.failed.append(FileFailure(d.source, e.reason, e.line))
                    item = None
                except Exception as e:  # a parser bug must not stop the other pages
                    report.failed.append(FileFailure(d.source, f"{type(e).__name__}: {e}"))
                    item = None
                if item is not None:
                    pending.append(item)
                    new = sum(v is None for v in item.vectors)
                    pending_new += new
                    tally.chunks_to_embed += new
                    if pending_new >= self.settings.write_batch_chunks:
                        self._flush(pending, report)
                        pending, pending_new = [], 0
            tally.files_done += 1
            tally.current = d.source
            tally.tell()
        self._flush(pending, report)
        report.skipped = sorted(r.source for r in kept)
        seen = {d.source for d in docs} | set(unchanged) | set(keep) | {f.path for f in failed}
        to_delete = (
            [r for s, r in sorted(indexed.items()) if s not in seen] if delete_missing else []
        )
        return self._finish(report, to_delete, [r.source for r in to_delete], kept, tenant, started)

    def _finish(
        self,
        report: IngestReport,
        to_delete: list[DocumentRecord],
        names: list[str],
        unchanged: list[DocumentRecord],
        tenant: str,
        started: float,
    ) -> IngestReport:
        """Delete what is gone, optimise after changes, count what the index holds.
        An interrupted run does neither: what it wrote is searchable as it is, and
        the next run deletes and optimises."""
        if self._stopping():
            report.interrupted = True
            to_delete, names = [], []
        t0 = time.perf_counter()
        for rec, name in zip(to_delete, names, strict=True):
            self.store.delete_document(rec.doc_id)
            report.deleted.append(name)
        report.add_stage("delete", time.perf_counter() - t0)

        if not report.interrupted and (report.indexed or report.deleted or report.orphans_removed):
            t0 = time.perf_counter()
            self.store.optimize()
            report.add_stage("optimize", time.perf_counter() - t0)

        for rec in unchanged:
            self._count_chapter(report, rec.chapter, rec.chunk_count, rec.token_count)
        report.index_chunks = self.store.info({"tenant": tenant}).chunks
        report.seconds = time.perf_counter() - started
        return report

    # -- the embedder --------------------------------------------------------------

    def _choosing(self) -> bool:
        """Whether this run picks the model: ``choose`` given, and none recorded yet."""
        return self.choose is not None and self._read(self.store.fingerprint) is None

    def _read(self, fn: Callable[[], _T]) -> _T:
        """A read of the store, retried like a batch write (``RAGLINE_INGEST_STORE_
        RETRIES`` with backoff): the run's first calls to a remote store must not
        fail on the one timeout or restart that its writes would have waited out."""
        return call_with_retry(
            fn,
            retries=self.settings.ingest_store_retries,
            backoff_s=self.settings.ingest_store_backoff_s,
        )

    def _find_malformed(
        self, indexed: dict[str, DocumentRecord], report: IngestReport, base: Path
    ) -> dict[str, list[str]]:
        """Files with a malformed stored chunk (``chunk_problem``: a field missing or
        of the wrong type), source → chunk ids. Their records in ``indexed`` are
        marked changed, so this run indexes them again though their hash is the
        same, and a warning names each. One read of every stored chunk
        (``RAGLINE_INGEST_REPAIR_MALFORMED``); a chunk whose document id and source
        are both broken matches no file and is left for ``ragline status``."""
        if not (self.settings.ingest_repair_malformed and indexed):
            return {}
        t0 = time.perf_counter()
        by_doc = {r.doc_id: source for source, r in indexed.items()}
        found: dict[str, list[str]] = {}
        problems: dict[str, str] = {}
        for chunks, _ in self.store.iter_chunks():
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
                    escaped(_relative(Path(source), base) if in_scope(source, base) else source),
                    f"{len(ids)} stored chunk(s) malformed ({problems[source]}); "
                    "the file is indexed again",
                )
            )
        report.add_stage("check", time.perf_counter() - t0)
        return found

    def _record_model(self, report: IngestReport, *, record: bool = True) -> None:
        report.model = self.embedder.fingerprint.name
        fingerprint = self.embedder.fingerprint
        # a mismatch is raised at once; a store error retried (the check is idempotent)
        self._read(lambda: check_model(self.store, fingerprint, record=record))
        self._unrecorded = not record

    def _choose_embedder(
        self,
        candidates: Sequence[tuple[str, Callable[[IngestReport], _Pending]]],
        report: IngestReport,
    ) -> _Prepared:
        """Prepare an evenly spread sample of ``candidates`` (source, prepare), let
        ``choose`` pick the embedder from their chunks' languages, record it. A
        sample that fails is left for the main loop, which reports it."""
        assert self.choose is not None
        t0 = time.perf_counter()
        prepared: _Prepared = {}
        for i in evenly_spaced(len(candidates), self.settings.embed_auto_sample_files):
            source, prepare = candidates[i]
            scratch = IngestReport(report.root, report.tenant, report.chunker, "")
            try:
                prepared[source] = (prepare(scratch), scratch)
            except Exception:  # prepared again, and reported, in the main loop
                continue
        languages = Counter(
            str(c.metadata.get("language") or DEFAULT_LANGUAGE)
            for item, _ in prepared.values()
            for c in item.chunks
        )
        self.embedder, report.model_choice = self.choose(languages)
        # nothing sampled (no file to index): nothing to decide on, so record nothing
        # unless something is written after all (see _flush)
        self._record_model(report, record=bool(languages))
        report.add_stage("choose model", time.perf_counter() - t0)
        return prepared

    @staticmethod
    def _take(prepared: _Prepared, source: str, report: IngestReport) -> _Pending | None:
        """The document prepared ahead for ``source``, its warnings and timings
        moved to ``report``; None when it was not."""
        ready = prepared.pop(source, None)
        if ready is None:
            return None
        item, scratch = ready
        report.warnings.extend(scratch.warnings)
        for stage, seconds in scratch.stage_seconds.items():
            report.add_stage(stage, seconds)
        return item

    # -- steps ---------------------------------------------------------------------

    def _remove_orphans(
        self, report: IngestReport, tenant: str, scope: Callable[[str], bool]
    ) -> None:
        """Delete chunks in ``scope`` whose document has no record.

        ``replace_documents`` writes a batch's chunks, then its records: a crash in
        between leaves chunks that no record lists. While the file exists the next
        run redoes it; once it is deleted, nothing would ever remove them. They
        exist only if the tenant's chunk count differs from the sum of its records'
        counts (one count query per run); only then are the chunks scanned.
        Done before anything is written, so a file still on disk is simply indexed
        again in this run."""
        records = self._read(lambda: self.store.documents(tenant))
        expected = sum(r.chunk_count for r in records)
        if self._read(lambda: self.store.info({"tenant": tenant}).chunks) == expected:
            return
        t0 = time.perf_counter()
        known = {r.doc_id for r in records}
        orphans: dict[str, str] = {}
        for chunks, _ in self.store.iter_chunks():
            for c in chunks:
                if c.tenant == tenant and c.doc_id not in known and scope(c.source):
                    orphans.setdefault(c.doc_id, c.source)
        for doc_id, source in sorted(orphans.items(), key=lambda kv: kv[1]):
            self.store.delete_document(doc_id)
            report.orphans_removed.append(escaped(source))
        report.add_stage("orphans", time.perf_counter() - t0)

    def _prepare_doc(
        self,
        d: SourcedDocument,
        tenant: str,
        indexed: dict[str, DocumentRecord],
        report: IngestReport,
    ) -> _Pending:
        t0 = time.perf_counter()
        doc = d.parse()
        report.add_stage("parse", time.perf_counter() - t0)
        return self._prepare_parsed(
            doc, d.source, d.source, d.content_hash, d.chapter, tenant, indexed, report
        )

    def _prepare(
        self,
        state: FileState,
        rel: str,
        base: Path,
        tenant: str,
        indexed: dict[str, DocumentRecord],
        report: IngestReport,
        default_title: str | None = None,
    ) -> _Pending:
        t0 = time.perf_counter()
        data = state.path.read_bytes()
        file_hash = _hash_bytes(data)  # the file may have changed since it was hashed
        doc = run_budgeted(
            parse_file,
            rel,
            len(data),
            Budget.of(self.settings),
            state.path,
            data,
            max_bytes=self.settings.max_file_bytes,
            default_title=default_title,
            ocr=ocr_options(self.settings),
            max_metadata_bytes=self.settings.max_metadata_bytes,
            pdf_tables=self.settings.pdf_tables,
            limits=parse_limits(self.settings),
        )
        report.add_stage("parse", time.perf_counter() - t0)
        chapter = chapter_of(state.path, base)
        return self._prepare_parsed(
            doc, state.source, rel, file_hash, chapter, tenant, indexed, report
        )

    def _prepare_parsed(
        self,
        doc: ParsedDocument,
        source: str,
        rel: str,
        file_hash: str,
        chapter: str,
        tenant: str,
        indexed: dict[str, DocumentRecord],
        report: IngestReport,
    ) -> _Pending:
        for line, message in [
            *skipped_heading_levels(doc.blocks),
            *missing_metadata(doc.blocks, chapter or doc.title),
        ]:
            report.warnings.append(FileFailure(rel, message, line))
        t1 = time.perf_counter()
        drafts = self.chunker.chunk(doc)
        t2 = time.perf_counter()
        report.add_stage("chunk", t2 - t1)
        if not drafts:
            raise IngestError(rel, None, "no text to index after parsing")
        chunks = build_chunks(
            doc,
            drafts,
            tenant=tenant,
            source=source,
            rel_path=rel,
            chapter=chapter,
            base_url=self.settings.base_url,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        doc_id = doc_id_for(tenant, source)
        old: dict[str, np.ndarray] = {}
        if source in indexed:
            old = self._read(lambda: document_vectors(self.store, doc_id))
        record = DocumentRecord(
            doc_id=doc_id,
            tenant=tenant,
            source=source,
            file_hash=file_hash,
            chunk_count=len(chunks),
            token_count=sum(c.token_count for c in chunks),
            chapter=chunks[0].chapter,
            title=doc.title,
            format=doc.format,
            ingested_at=chunks[0].created_at,
        )
        vectors = [old.get(c.content_hash) for c in chunks]
        return _Pending(record, chunks, vectors, rel)

    def _flush(self, pending: list[_Pending], report: IngestReport) -> None:
        """Embed what is missing across all pending files, then write them together."""
        if not pending:
            return
        missing = {id(p): sum(v is None for v in p.vectors) for p in pending}
        if any(missing.values()):
            t0 = time.perf_counter()
            failed = self._embed_missing([p for p in pending if missing[id(p)]], report)
            report.add_stage("embed", time.perf_counter() - t0)
            pending = [p for p in pending if id(p) not in failed]
            if not pending:
                return
        t0 = time.perf_counter()
        dim = self.embedder.dimension
        writes = [
            DocumentWrite(
                record=p.record,
                chunks=p.chunks,
                vectors=np.vstack([v for v in p.vectors if v is not None]).astype(
                    np.float32, copy=False
                )
                if p.vectors
                else np.zeros((0, dim), np.float32),
            )
            for p in pending
        ]
        if self._unrecorded:  # the model was chosen on no sample: record it before writing
            self._record_model(report)
        written = self._write(writes, [p.rel for p in pending], report)
        report.add_stage("write", time.perf_counter() - t0)
        if not written:
            return
        for p in pending:
            report.indexed.append(p.rel)
            report.chunks += len(p.chunks)
            report.chunks_embedded += missing[id(p)] - p.dropped
            report.tokens += p.record.token_count
            self._count_chapter(report, p.record.chapter, len(p.chunks), p.record.token_count)
        report.chunks_reused = report.chunks - report.chunks_embedded

    def _write(self, writes: list[DocumentWrite], names: list[str], report: IngestReport) -> bool:
        """Write one batch, retried with backoff after a store error
        (``RAGLINE_INGEST_STORE_RETRIES``). A batch that still fails is reported
        under each of its files and False returned, so the run goes on: the write
        is one atomic replace, so the files keep what was stored before, and
        without a new record they are indexed again by the next run."""
        retries = self.settings.ingest_store_retries
        try:
            call_with_retry(
                lambda: self.store.replace_documents(writes),
                retries=retries,
                backoff_s=self.settings.ingest_store_backoff_s,
            )
        except ModelMismatchError:
            raise
        except (StoreError, OSError) as e:
            reason = (
                f"store write failed after {retries + 1} attempt(s) "
                f"(RAGLINE_INGEST_STORE_RETRIES): {e}; the next run tries again"
            )
            report.failed.extend(FileFailure(name, reason) for name in names)
            return False
        return True

    def _embed_missing(self, group: list[_Pending], report: IngestReport) -> set[int]:
        """Embed the missing vectors of ``group``'s files, halving the batch on an
        embedding error until the failing chunks are alone, so only they are left
        out (each named in the report's warnings; its file is recorded as partial).
        A file left with no chunk, or whose chunks failed while the embedder
        looked down, fails whole (named in the report) and keeps its previous
        chunks. Returns the ids of the files that failed."""
        todo = [(p, i) for p in group for i, v in enumerate(p.vectors) if v is None]
        run = _EmbedRun()
        size = self._call_chunks()
        try:
            for start in range(0, len(todo), size):
                if self._stopping():
                    raise _Stopped
                self._embed_halving(todo[start : start + size], run)
        except _Stopped:
            # left whole for the next run, neither written nor failed: the files
            # embedded completely are written by the caller
            return {id(p) for p in group if any(v is None for v in p.vectors)}
        failed: set[int] = set()
        for p in group:
            lost = [i for i, v in enumerate(p.vectors) if v is None]
            if not lost:
                continue
            self._tally.chunks_to_embed -= len(lost)  # they will not be embedded now
            if run.down is not None or len(lost) == len(p.chunks):
                reason = run.down or run.rejected[(id(p), lost[0])]
                report.failed.append(FileFailure(p.rel, f"embedding failed: {reason}"))
                failed.add(id(p))
                continue
            for i in lost:
                c = p.chunks[i]
                where = f"page {c.page}, " if c.page is not None else ""
                report.warnings.append(
                    FileFailure(
                        p.rel,
                        f"chunk {c.chunk_index + 1} of {len(p.chunks)} ({where}section "
                        f"{c.section or c.title!r}) left out: embedding failed: "
                        f"{run.rejected[(id(p), i)]}; the next run tries it again",
                    )
                )
            _drop_chunks(p, lost)
        if run.rejected or run.down is not None:
            self._tally.tell()
        return failed

    def _embed_halving(self, items: list[tuple[_Pending, int]], run: _EmbedRun) -> None:
        """Embed the chunks ``items`` name in one call; when it fails, embed each
        half, down to single chunks (recorded in ``run.rejected``)."""
        if not items or run.down is not None:
            return
        t0 = time.perf_counter()
        try:
            vecs = self._embed_checked([p.chunks[i].embed_text for p, i in items])
        except EmbeddingError as e:
            self._tally.embed_seconds += time.perf_counter() - t0
            if len(items) == 1:
                p, i = items[0]
                run.rejected[(id(p), i)] = str(e)
                if not run.succeeded and len(run.rejected) >= 2:
                    run.down = str(e)  # not one bad chunk: no call has worked at all
                return
            half = len(items) // 2
            self._embed_halving(items[:half], run)
            self._embed_halving(items[half:], run)
            return
        run.succeeded = True
        for (p, i), v in zip(items, vecs, strict=True):
            p.vectors[i] = v
        self._tally.embed_seconds += time.perf_counter() - t0
        self._tally.chunks_embedded += len(items)
        self._tally.tell()

    def _embed_checked(self, texts: list[str]) -> Vectors:
        """The embedder's vectors, within the time limit, with the right shape and
        finite values (a NaN would poison every search that touches the chunk)."""
        limit = self.settings.embed_timeout_per_100_s * max(1, -(-len(texts) // 100))
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragline-embed")
        try:
            future = pool.submit(self.embedder.embed_documents, texts)
            deadline = time.monotonic() + limit
            while True:  # waited for in steps, so a stop is seen within one
                if self._stopping():
                    raise _Stopped
                try:
                    vecs = future.result(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
                    break
                except FutureTimeout:
                    if time.monotonic() >= deadline:
                        raise
        except FutureTimeout:
            raise EmbeddingError(
                f"no vectors for {len(texts)} chunks within {limit:.0f} s "
                "(RAGLINE_EMBED_TIMEOUT_PER_100_S)"
            ) from None
        finally:
            pool.shutdown(wait=False)
        expected = (len(texts), self.embedder.dimension)
        if tuple(vecs.shape) != expected:
            raise EmbeddingError(
                f"the model returned vectors of shape {vecs.shape}, not {expected}"
            )
        if not np.isfinite(vecs).all():
            raise EmbeddingError("the model returned NaN or infinite values")
        return vecs

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _call_chunks(self) -> int:
        """Chunks per embedding call: a stop abandons at most one call's work."""
        configured = self.settings.ingest_embed_call_chunks
        if configured:
            return configured
        return self.settings.embed_batch_size * (self.settings.embed_threads or os.cpu_count() or 1)

    @staticmethod
    def _count_chapter(report: IngestReport, chapter: str, chunks: int, tokens: int) -> None:
        c = report.per_chapter.setdefault(chapter, ChapterCount())
        c.files += 1
        c.chunks += chunks
        c.tokens += tokens


def _drop_chunks(p: _Pending, lost: Sequence[int]) -> None:
    """Leave chunks out of a pending file: its record counts what is written, and
    its hash is marked partial so the next run indexes the file again."""
    gone = set(lost)
    keep = [k for k in range(len(p.chunks)) if k not in gone]
    p.chunks = [p.chunks[k] for k in keep]
    p.vectors = [p.vectors[k] for k in keep]
    p.dropped = len(gone)
    p.record = replace(
        p.record,
        chunk_count=len(p.chunks),
        token_count=sum(c.token_count for c in p.chunks),
        file_hash=PARTIAL_HASH + p.record.file_hash,
    )


def parse_limits(settings: Settings) -> ParseLimits:
    """The bounds on what one file may cost to parse (zip bombs, huge sheets)."""
    return ParseLimits(
        max_unpacked_bytes=settings.max_unpacked_bytes,
        max_unpack_ratio=settings.max_unpack_ratio,
        max_sheet_cells=settings.max_sheet_cells,
        max_markdown_lines=settings.max_markdown_lines,
        max_pdf_pages=settings.max_pdf_pages,
        max_html_tags=settings.max_html_tags,
    )


def ocr_options(settings: Settings) -> OcrOptions | None:
    """How parsers OCR scans and images; None when RAGLINE_OCR is off."""
    if not settings.ocr:
        return None
    return OcrOptions(
        languages=settings.ocr_languages,
        command=settings.ocr_command,
        dpi=settings.ocr_dpi,
        timeout_s=settings.ocr_timeout_s,
    )
