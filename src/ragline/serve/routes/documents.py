"""``/api/documents``: list, read, delete and upload the caller's documents (an
upload is stored under a content hash and ingested for the caller's tenant)."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Annotated, Any

from fastapi import APIRouter, File, UploadFile
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from ragline.ingest.records import doc_id_for
from ragline.serve import schemas as s
from ragline.serve.deps import CallerDep, StateDep, wait_ready
from ragline.serve.documents import UploadRecord, now_iso
from ragline.serve.errors import ERROR_RESPONSES, LOOKUP_RESPONSES, engine_error
from ragline.serve.state import ServeState
from ragline.store.base import StoreError
from ragline.types import DocumentRecord
from ragline.validation import (
    RequestProblem,
    UploadName,
    check_upload_content,
    upload_name,
)

router = APIRouter(tags=["documents"])
TEXT = {"type": "string"}


def document_out(rec: DocumentRecord, upload: UploadRecord | None) -> dict[str, Any]:
    return {
        "doc_id": rec.doc_id,
        "filename": upload.original_name if upload else Path(rec.source).name,
        "title": rec.title,
        "chapter": rec.chapter,
        "format": rec.format,
        "chunk_count": rec.chunk_count,
        "token_count": rec.token_count,
        "file_hash": rec.file_hash,
        "ingested_at": rec.ingested_at,
        "uploaded": upload is not None,
    }


async def tenant_documents(state: ServeState, tenant: str) -> list[DocumentRecord]:
    await wait_ready(state)
    try:
        return await run_in_threadpool(state.rag.store.documents, tenant)
    except StoreError as exc:
        raise engine_error(exc) from None


async def owned_document(state: ServeState, doc_id: str, tenant: str) -> DocumentRecord:
    """The tenant's document ``doc_id``; another tenant's is as absent as an unknown one."""
    for rec in await tenant_documents(state, tenant):
        if rec.doc_id == doc_id:
            return rec
    raise RequestProblem(f"doc_id {doc_id!r}: no such document", status_code=404, field="doc_id")


@router.get(
    "/api/documents", response_model=s.DocumentList, responses=ERROR_RESPONSES,
    summary="The caller's documents",
)  # fmt: skip
async def list_documents(who: CallerDep, state: StateDep) -> dict[str, Any]:
    docs = await tenant_documents(state, who.tenant)
    uploads = await run_in_threadpool(state.uploads.by_tenant, who.tenant)
    out = [document_out(d, uploads.get(d.doc_id)) for d in docs]
    out.sort(key=lambda d: (d["filename"], d["doc_id"]))
    return {"documents": out, "total": len(out)}


@router.get(
    "/api/documents/{doc_id}", response_model=s.DocumentOut, responses=LOOKUP_RESPONSES,
    summary="One of the caller's documents",
)  # fmt: skip
async def get_document(doc_id: str, who: CallerDep, state: StateDep) -> dict[str, Any]:
    rec = await owned_document(state, doc_id, who.tenant)
    uploads = await run_in_threadpool(state.uploads.by_tenant, who.tenant)
    return document_out(rec, uploads.get(doc_id))


@router.get(
    "/api/documents/{doc_id}/text", response_class=Response,
    responses={**LOOKUP_RESPONSES, 200: {"content": {"text/plain": {"schema": TEXT}}}},
    summary="One of the caller's documents as indexed, as text",
)  # fmt: skip
async def document_text(doc_id: str, who: CallerDep, state: StateDep) -> Response:
    """The document's chunks in order: what a source link in the web UI opens. The
    server's path to the file is never shown; the text is what answers quote."""
    rec = await owned_document(state, doc_id, who.tenant)
    store = state.rag.store

    def read() -> str:
        chunks = sorted(
            store.chunks_by_index(rec.doc_id, range(rec.chunk_count)),
            key=lambda c: c.chunk_index,
        )
        return "\n\n".join(c.text.strip() for c in chunks)

    try:
        text = await run_in_threadpool(read)
    except StoreError as exc:
        raise engine_error(exc) from None
    head = f"{rec.title}\n\n" if rec.title else ""
    return Response(head + text, media_type="text/plain; charset=utf-8")


@router.delete(
    "/api/documents/{doc_id}", response_model=s.DeleteResponse, responses=LOOKUP_RESPONSES,
    summary="Remove one of the caller's documents from the index",
)  # fmt: skip
async def delete_document(doc_id: str, who: CallerDep, state: StateDep) -> dict[str, Any]:
    refuse_if_read_only(state)
    await owned_document(state, doc_id, who.tenant)
    engine = state.rag

    def remove() -> None:
        with state.write_lock:  # the file too: a re-upload must not find it half-gone
            engine.store.delete_document(doc_id)
            engine.store.optimize()
            state.uploads.forget(who.tenant, doc_id)

    try:
        await run_in_threadpool(remove)
    except StoreError as exc:
        raise engine_error(exc) from None
    return {"doc_id": doc_id, "deleted": True}


@router.post(
    "/api/documents", response_model=s.UploadResponse, responses=ERROR_RESPONSES,
    summary="Upload one file and index it for the caller's tenant",
)  # fmt: skip
async def upload_document(
    who: CallerDep,
    state: StateDep,
    file: Annotated[
        UploadFile, File(description="A Markdown, text, HTML, PDF, CSV, Office or EPUB file.")
    ],
) -> dict[str, Any]:
    refuse_if_read_only(state)
    settings = state.settings
    limit = settings.max_upload_bytes
    data = await file.read(limit + 1)
    await file.close()
    if len(data) > limit:
        raise RequestProblem(
            f"the file is larger than {limit:,} bytes (RAGLINE_MAX_UPLOAD_BYTES)",
            status_code=413,
            field="file",
        )
    # Only types the ingest takes too: any other would be stored, skipped by the
    # sync, and reported as an "unchanged" upload with no document.
    ingested = {e.lower() for e in state.rag.settings.extensions}
    accepted = tuple(e for e in settings.upload_extensions if e.lower() in ingested)
    name = upload_name(file.filename or "", data, who.tenant, accepted)
    check_upload_content(data, name.extension)
    await wait_ready(state)
    return await run_in_threadpool(ingest_upload, state, who.tenant, name, data)


def ingest_upload(state: ServeState, tenant: str, name: UploadName, data: bytes) -> dict[str, Any]:
    """Store the file (once per content) and ingest it, under the write lock."""
    engine = state.rag
    folder = state.uploads.folder(tenant)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name.stored
    with state.write_lock:
        if not path.exists():
            tmp = path.with_name(f".{name.stored}.part")
            tmp.write_bytes(data)
            tmp.replace(path)
        # Stored under a content hash; a file without a title of its own is
        # titled by the name the client gave it, not by the hash.
        report = engine.ingest(path, tenant=tenant, title=PurePath(name.original).stem)
        if report.failed:
            if not report.skipped:
                path.unlink(missing_ok=True)
            reason = report.failed[0]
            line = f" (line {reason.line})" if reason.line else ""
            raise RequestProblem(
                f"{name.original}{line}: {reason.reason}", field="file", code="ingest_failed"
            )
        doc_id = doc_id_for(tenant, path.resolve().as_posix())
        upload = UploadRecord(doc_id, tenant, name.original, name.stored, len(data), now_iso())
        state.uploads.record(upload)
        docs = {d.doc_id: d for d in engine.store.documents(tenant)}
    rec = docs.get(doc_id)
    return {
        "document": document_out(rec, upload) if rec else None,
        "status": "indexed" if report.indexed else "unchanged",
        "chunks": report.chunks,
        "chunks_embedded": report.chunks_embedded,
        "tokens": report.tokens,
        "seconds": round(report.seconds, 3),
    }


def refuse_if_read_only(state: ServeState) -> None:
    """A 503 saying why, for a write on an index served read-only."""
    if state.uploads.read_only:
        raise RequestProblem(
            f"this server is read-only: {state.uploads.read_only}; search and answers still work",
            status_code=503,
            code="read_only",
        )
