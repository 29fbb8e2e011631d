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

The parts live beside this module: :mod:`.plan` (what changed, from hashes),
:mod:`.prepare` (parse and chunk one document), :mod:`.batch` (embed and write
together), :mod:`.embedding` (the halving around bad chunks), :mod:`.repair`
(orphaned and malformed chunks) and :mod:`.progress`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from ragline.embed.base import Embedder
from ragline.embed.choice import evenly_spaced
from ragline.ingest.batch import Batch, count_chapter
from ragline.ingest.budget import Budget
from ragline.ingest.chunk import Chunker
from ragline.ingest.discover import discover, escaped, resolved
from ragline.ingest.errors import IngestError
from ragline.ingest.failures import FailureMemory, Remembered
from ragline.ingest.ignore import rules_for
from ragline.ingest.plan import (
    FileState,
    SourcedDocument,
    hash_bytes,
    in_scope,
    no_documents_hint,
    plan_sync,
    relative,
)
from ragline.ingest.prepare import Pending, Preparer, parse_limits
from ragline.ingest.progress import ProgressCallback, Tally
from ragline.ingest.repair import find_malformed, remove_orphans
from ragline.ingest.report import FileFailure, IngestReport
from ragline.settings import Settings
from ragline.store.base import MALFORMED_CHUNKS, IndexStore, check_model
from ragline.store.reads import document_vectors
from ragline.store.retrying import call_with_retry
from ragline.text.language import DEFAULT_LANGUAGE
from ragline.types import DocumentRecord

_T = TypeVar("_T")


#: choose(languages): the embedder a new index is built with, given the chunk
#: languages (chunks per ISO code) of its sampled files, and why, for the report
#: (``RAGLINE_EMBEDDER=auto``; see :mod:`ragline.embed.choice`).
ChooseEmbedder = Callable[[Mapping[str, int]], tuple[Embedder, str]]


#: A document prepared ahead (to decide the embedder), with the report of its steps.
_Prepared = dict[str, tuple[Pending, IngestReport]]


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
        self._preparer = Preparer(
            settings,
            chunker,
            lambda doc_id: self._read(lambda: document_vectors(self.store, doc_id)),
        )

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
        remove_orphans(self.store, self._read, report, tenant, lambda s: in_scope(s, root))
        found = discover(root, self.settings.extensions, rules_for(root, self.settings.exclude))
        report.excluded = found.excluded
        paths = found.files
        report.files = len(paths) + len(found.rejected)
        if not report.files:
            hint = no_documents_hint(self.settings.extensions, found.excluded)
            report.warnings.append(FileFailure(root.as_posix(), hint))
        for path, problem in found.rejected:
            report.failed.append(FileFailure(escaped(relative(path, base)), problem))
        indexed = {
            r.source: r
            for r in self._read(lambda: self.store.documents(tenant))
            if in_scope(r.source, root)
        }
        damaged = (
            find_malformed(self.store, indexed, report, base)
            if self.settings.ingest_repair_malformed
            else {}
        )

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
                states.append(FileState(path, path.as_posix(), size, hash_bytes(path.read_bytes())))
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
                    lambda scratch, s=s: self._preparer.file(
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
        tally = Tally(progress, len(plan.to_index))
        batch = self._batch(report, tally)
        for state in plan.to_index:
            if self._stopping():
                break
            rel = state.path.relative_to(base).as_posix()
            known = memory.recall(state.source, state.file_hash, limits)
            if known is not None:  # failed before with this very content: not parsed again
                report.failed.append(FileFailure(rel, known.reason, known.line))
                tally.file_done(rel)
                continue
            item = None
            try:
                item = self._take(prepared, state.source, report) or self._preparer.file(
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
                batch.add(item)
            tally.file_done(rel)
        batch.flush()
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
        remove_orphans(self.store, self._read, report, tenant, lambda s: s.startswith(root))
        indexed = {r.source: r for r in self.store.documents(tenant) if r.source.startswith(root)}
        kept = [indexed[s] for s in sorted(set(unchanged)) if s in indexed]
        prepared: _Prepared = {}
        if choosing:
            candidates = [
                (
                    d.source,
                    lambda scratch, d=d: self._preparer.document(d, tenant, indexed, scratch),
                )
                for d in docs
                if not (d.source in indexed and indexed[d.source].file_hash == d.content_hash)
            ]
            prepared = self._choose_embedder(candidates, report)
        tally = Tally(progress, len(docs))
        batch = self._batch(report, tally)
        for d in docs:
            if self._stopping():
                break
            rec = indexed.get(d.source)
            if rec is not None and rec.file_hash == d.content_hash:
                kept.append(rec)
            else:
                try:
                    item = self._take(prepared, d.source, report) or self._preparer.document(
                        d, tenant, indexed, report
                    )
                except IngestError as e:
                    report.failed.append(FileFailure(d.source, e.reason, e.line))
                    item = None
                except Exception as e:  # a parser bug must not stop the other pages
                    report.failed.append(FileFailure(d.source, f"{type(e).__name__}: {e}"))
                    item = None
                if item is not None:
                    batch.add(item)
            tally.file_done(d.source)
        batch.flush()
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
            count_chapter(report, rec.chapter, rec.chunk_count, rec.token_count)
        report.index_chunks = self.store.info({"tenant": tenant}).chunks
        report.seconds = time.perf_counter() - started
        return report

    # -- the store and the embedder ----------------------------------------------------

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

    def _record_model(self, report: IngestReport, *, record: bool = True) -> None:
        report.model = self.embedder.fingerprint.name
        fingerprint = self.embedder.fingerprint
        # a mismatch is raised at once; a store error retried (the check is idempotent)
        self._read(lambda: check_model(self.store, fingerprint, record=record))
        self._unrecorded = not record

    def _choose_embedder(
        self,
        candidates: Sequence[tuple[str, Callable[[IngestReport], Pending]]],
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
        # unless something is written after all (see _batch)
        self._record_model(report, record=bool(languages))
        report.add_stage("choose model", time.perf_counter() - t0)
        return prepared

    @staticmethod
    def _take(prepared: _Prepared, source: str, report: IngestReport) -> Pending | None:
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

    def _batch(self, report: IngestReport, tally: Tally) -> Batch:
        """The run's batch, embedded by the model in use once it is chosen."""

        def before_write() -> None:
            if self._unrecorded:  # the model was chosen on no sample: record it now
                self._record_model(report)

        return Batch(
            self.store, self.embedder, self.settings, report, tally, self.stop, before_write
        )

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()
