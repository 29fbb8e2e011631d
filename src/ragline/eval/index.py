"""Ingest a BEIR corpus into a throw-away index, or reuse the one built before.

Each corpus document becomes one ragline document (``title`` → the title field,
``text`` → the body) and goes through the same chunker, embedder and store as
``ragline ingest``, so the scores measure what users get. Only the Store and
Embedder protocols are used: the evaluation runs unchanged on any store the
settings choose.

An index is identified by a key over the corpus hash, the model fingerprint and
the chunker settings; it lives in its own tenant (``eval-<key>``) of the store
``STORE_URL`` names, which is LanceDB in ``eval_cache_dir/<key>`` when it is
empty. The marker (``eval_cache_dir/<key>/eval-index.json``) records that
store's location, so a run against another store never trusts it. A run whose
key and store match a complete earlier build reuses it; an interrupted build
resumes (documents already written are skipped, writes are idempotent).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ragline.embed.base import Embedder
from ragline.embed.choice import evenly_spaced
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import Ragline, chunk_window, make_chunker
from ragline.eval.beir import BeirDocument, DatasetError
from ragline.ingest.chunk.section import SECTION_CHUNKER_VERSION
from ragline.ingest.errors import IngestError
from ragline.ingest.parse.markdown import parse_markdown
from ragline.ingest.parse.text import parse_text
from ragline.ingest.records import build_chunks, doc_id_for
from ragline.settings import Settings
from ragline.store.base import DocumentWrite, check_model
from ragline.store.factory import store_location
from ragline.text.language import chunk_language, document_language
from ragline.types import DocumentRecord, ParsedDocument

#: Bump when the way documents are turned into chunks here changes (3: chunks keep
#: their detected language; format 2 indexes analysed every chunk as English).
EVAL_INDEX_FORMAT = 3
MANIFEST = "eval-index.json"

#: progress(done_documents, total_documents)
IndexProgress = Callable[[int, int], None]


@dataclass(slots=True)
class EvalIndex:
    """A built (or reused) evaluation index and how to map its chunks back to documents."""

    rag: Ragline  # searches the eval tenant of the eval store
    key: str
    tenant: str
    documents: int
    chunks: int
    reused: bool
    seconds: float
    doc_of: dict[str, str]  # ragline doc_id → dataset document id

    def close(self) -> None:
        self.rag.close()


def chunking_settings(settings: Settings) -> dict[str, Any]:
    """The settings that change which chunks a document makes."""
    return {
        "chunker": settings.chunker,
        "section_chunker_version": SECTION_CHUNKER_VERSION,
        "chunk_fit_model": settings.chunk_fit_model,
        "chunk_max_tokens": settings.effective_chunk_max_tokens,
        "chunk_overlap_tokens": settings.chunk_overlap_tokens,
        "chunk_min_tokens": settings.chunk_min_tokens,
        "recursive_chunk_chars": settings.recursive_chunk_chars,
        "recursive_overlap_chars": settings.recursive_overlap_chars,
    }


def index_key(
    corpus_hash: str, fingerprint: dict[str, Any], chunking: dict[str, Any], name: str
) -> str:
    """Cache key of an eval index: same corpus under the same name, same model, same
    chunks ⇒ same index. The name counts: it is in every chunk's source and document
    id, so a copy of a corpus in another folder reusing the index matched no document."""
    blob = json.dumps(
        {
            "format": EVAL_INDEX_FORMAT,
            "corpus": corpus_hash,
            "name": name,
            "model": fingerprint,
            "chunking": chunking,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def source_for(corpus_name: str, doc_id: str) -> str:
    """The ``source`` of a corpus document in the index (shown with answers)."""
    return f"{corpus_name}/corpus.jsonl#{doc_id}"


def document_body(doc: BeirDocument) -> str:
    """The text a corpus document is ingested as: the file a user would have, a title
    line, a blank line, then the text. The title thus counts in the body's BM25
    statistics as a Markdown H1 or a text file's first line does (BM25 over the
    title field alone, max-combined with the body, loses ~0.08 nDCG@10 on SciFact;
    see benchmarks/results/tuning.md)."""
    title, text = doc.title.strip(), doc.text.strip()
    if title and text:
        return f"{title}\n\n{doc.text}"
    return doc.text if text else doc.title


def indexed_text(doc: BeirDocument) -> str:
    """The text the chunks' offsets refer to: :func:`document_body` as the text
    parser normalises it (line ends, byte-order mark), so citation spans can be
    located in it."""
    return parse_document(doc, doc.id).body


def parse_document(doc: BeirDocument, source: str) -> ParsedDocument:
    """The corpus document parsed as ingest would parse its file: plain text (title
    line first, see :func:`document_body`) or Markdown (its own front matter and
    headings; ``title`` when it has none)."""
    if doc.markdown:
        try:
            parsed = parse_markdown(doc.text, source)
        except IngestError as e:  # front matter that is not YAML: name the document
            raise DatasetError(Path(source), e.line, e.reason) from None
        return replace(parsed, title=parsed.title or doc.title.strip() or doc.id)
    return replace(parse_text(document_body(doc), source), title=doc.title.strip() or doc.id)


def corpus_languages(corpus: Sequence[BeirDocument], settings: Settings) -> Counter[str]:
    """Chunk languages of an evenly spread sample of the corpus (as many documents as
    ``RAGLINE_EMBED_AUTO_SAMPLE_FILES``): what ``RAGLINE_EMBEDDER=auto`` decides on at
    ingest, so an eval measures the model a user's ingest would choose."""
    chunker = make_chunker(settings, TokenCounter())
    languages: Counter[str] = Counter()
    for i in evenly_spaced(len(corpus), settings.embed_auto_sample_files):
        parsed = parse_document(corpus[i], corpus[i].id)
        language = document_language(f"{parsed.title}\n{parsed.body}")
        for draft in chunker.chunk(parsed):
            languages[chunk_language(draft.text, language)] += 1
    return languages


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_manifest(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".manifest-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def open_eval_index(
    corpus: Sequence[BeirDocument],
    corpus_hash: str,
    corpus_name: str,
    settings: Settings,
    embedder: Embedder,
    *,
    progress: IndexProgress | None = None,
    rebuild: bool = False,
) -> EvalIndex:
    """The eval index of ``corpus``: reused when a complete one with the same key exists,
    else built (or its interrupted build finished) now."""
    started = time.perf_counter()
    fingerprint = embedder.fingerprint.to_dict()
    key = index_key(corpus_hash, fingerprint, chunking_settings(settings), corpus_name)
    short = key[:16]
    tenant = f"eval-{short}"
    folder = settings.eval_cache_dir / short
    eval_settings = settings.model_copy(update={"index_dir": folder, "tenant": tenant})
    where = store_location(eval_settings).describe()  # no secrets: it is written down
    rag = Ragline(eval_settings, embedder=embedder)
    doc_of = {doc_id_for(tenant, source_for(corpus_name, d.id)): d.id for d in corpus}
    manifest_path = folder / MANIFEST
    try:
        store = rag.store
        check_model(store, embedder.fingerprint, record=True)
        manifest = _read_manifest(manifest_path)
        if (
            not rebuild
            and manifest is not None
            and manifest.get("key") == key
            and manifest.get("store") == where
            and manifest.get("complete") is True
            and store.info({"tenant": tenant}).chunks == manifest.get("chunks")
        ):
            return EvalIndex(
                rag=rag,
                key=key,
                tenant=tenant,
                documents=int(manifest["documents"]),
                chunks=int(manifest["chunks"]),
                reused=True,
                seconds=time.perf_counter() - started,
                doc_of=doc_of,
            )
        _write_manifest(
            manifest_path, {"key": key, "store": where, "complete": False, "corpus": corpus_name}
        )
        done = set() if rebuild else {r.doc_id for r in store.documents(tenant)}
        if rebuild:
            for record in store.documents(tenant):
                store.delete_document(record.doc_id)
        _ingest(rag, corpus, corpus_name, tenant, done, progress)
        chunks = store.info({"tenant": tenant}).chunks
        _write_manifest(
            manifest_path,
            {
                "key": key,
                "store": where,
                "complete": True,
                "corpus": corpus_name,
                "documents": len(corpus),
                "chunks": chunks,
                "model": embedder.fingerprint.to_dict(),
                "chunking": chunking_settings(settings),
                "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
    except BaseException:
        rag.close()
        raise
    return EvalIndex(
        rag=rag,
        key=key,
        tenant=tenant,
        documents=len(corpus),
        chunks=chunks,
        reused=False,
        seconds=time.perf_counter() - started,
        doc_of=doc_of,
    )


def _ingest(
    rag: Ragline,
    corpus: Sequence[BeirDocument],
    corpus_name: str,
    tenant: str,
    done: set[str],
    progress: IndexProgress | None,
) -> None:
    """Chunk, embed and write the documents not yet in the index, in batches of
    ``eval_write_batch_chunks`` new chunks (one store commit each), then optimize."""
    settings, store, embedder = rag.settings, rag.store, rag.embedder
    chunker = make_chunker(settings, TokenCounter(), window=chunk_window(settings, embedder))
    created = datetime.now(UTC).isoformat(timespec="seconds")
    pending: list[tuple[DocumentRecord, list[Any]]] = []
    pending_chunks = 0

    def flush() -> None:
        nonlocal pending, pending_chunks
        if not pending:
            return
        texts = [c.embed_text for _, chunks in pending for c in chunks]
        vectors = embedder.embed_documents(texts)
        writes: list[DocumentWrite] = []
        row = 0
        for record, chunks in pending:
            part = np.asarray(vectors[row : row + len(chunks)], dtype=np.float32)
            writes.append(DocumentWrite(record=record, chunks=chunks, vectors=part))
            row += len(chunks)
        store.replace_documents(writes)
        pending, pending_chunks = [], 0

    total = len(corpus)
    for n, doc in enumerate(corpus, start=1):
        source = source_for(corpus_name, doc.id)
        doc_id = doc_id_for(tenant, source)
        if doc_id not in done:
            parsed = parse_document(doc, source)
            drafts = chunker.chunk(parsed)
            chunks = build_chunks(
                parsed,
                drafts,
                tenant=tenant,
                source=source,
                rel_path=doc.id,
                chapter=corpus_name,
                base_url=f"beir://{corpus_name}",
                created_at=created,
            )
            for c in chunks:  # keep the language: BM25 analyses a chunk in it
                c.metadata = {"language": c.metadata["language"], "corpus_id": doc.id}
            record = DocumentRecord(
                doc_id=doc_id,
                tenant=tenant,
                source=source,
                file_hash=hashlib.sha256(
                    json.dumps([doc.id, doc.title, doc.text]).encode()
                ).hexdigest(),
                chunk_count=len(chunks),
                token_count=sum(c.token_count for c in chunks),
                chapter=corpus_name,
                title=parsed.title,
                format="text",
                ingested_at=created,
            )
            pending.append((record, chunks))
            pending_chunks += len(chunks)
            if pending_chunks >= settings.eval_write_batch_chunks:
                flush()
        if progress and (n % 64 == 0 or n == total):
            progress(n, total)
    flush()
    store.optimize()
