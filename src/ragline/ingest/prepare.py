"""One document made ready to embed and write: parsed (within its budget), checked
for skipped headings and missing metadata, chunked, given its record, and paired
with the stored vectors of the chunks whose content did not change."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ragline.ingest.budget import Budget, run_budgeted
from ragline.ingest.chunk import Chunker
from ragline.ingest.discover import chapter_of
from ragline.ingest.errors import IngestError
from ragline.ingest.hygiene import missing_metadata, skipped_heading_levels
from ragline.ingest.parse import OcrOptions, ParseLimits, parse_file
from ragline.ingest.plan import FileState, SourcedDocument, hash_bytes
from ragline.ingest.records import build_chunks, doc_id_for
from ragline.ingest.report import FileFailure, IngestReport
from ragline.settings import Settings
from ragline.types import Chunk, DocumentRecord, ParsedDocument

#: stored_vectors(doc_id): the stored vectors of a document's chunks, by content hash.
StoredVectors = Callable[[str], dict[str, np.ndarray]]


@dataclass(slots=True)
class Pending:
    """A prepared document waiting to be embedded (``None`` vectors) and written."""

    record: DocumentRecord
    chunks: list[Chunk]
    vectors: list[np.ndarray | None]
    rel: str
    dropped: int = 0  # chunks left out because the embedder failed on them


class Preparer:
    """Prepares files and sourced documents for one sync (see the module doc)."""

    def __init__(self, settings: Settings, chunker: Chunker, stored_vectors: StoredVectors):
        self.settings = settings
        self.chunker = chunker
        self.stored_vectors = stored_vectors

    def document(
        self,
        d: SourcedDocument,
        tenant: str,
        indexed: dict[str, DocumentRecord],
        report: IngestReport,
    ) -> Pending:
        t0 = time.perf_counter()
        doc = d.parse()
        report.add_stage("parse", time.perf_counter() - t0)
        return self.parsed(
            doc, d.source, d.source, d.content_hash, d.chapter, tenant, indexed, report
        )

    def file(
        self,
        state: FileState,
        rel: str,
        base: Path,
        tenant: str,
        indexed: dict[str, DocumentRecord],
        report: IngestReport,
        default_title: str | None = None,
    ) -> Pending:
        t0 = time.perf_counter()
        data = state.path.read_bytes()
        file_hash = hash_bytes(data)  # the file may have changed since it was hashed
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
        return self.parsed(doc, state.source, rel, file_hash, chapter, tenant, indexed, report)

    def parsed(
        self,
        doc: ParsedDocument,
        source: str,
        rel: str,
        file_hash: str,
        chapter: str,
        tenant: str,
        indexed: dict[str, DocumentRecord],
        report: IngestReport,
    ) -> Pending:
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
            old = self.stored_vectors(doc_id)
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
        return Pending(record, chunks, vectors, rel)


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
