"""ragline: grounded, cited answers over a folder of documents.

Public API: :class:`Ragline` (ingest, search, ask, reindex, status),
:class:`Settings` (every option, read from the environment), the protocols of
the replaceable parts, the plain data types passed between stages, and the
errors. Names are imported lazily, so ``import ragline.types`` (or
``from ragline import Chunk``) does not load the model runtime and the store.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ragline.lazy import lazy_getattr

# No telemetry. onnxruntime (1.32) records events in
# ~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db as soon as it is
# imported; this variable, read at that import, is the one switch that stops it
# (disable_telemetry_events() comes too late). Set here, before any part of
# ragline imports onnxruntime, and inherited by every process ragline starts.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
# numpy's OpenBLAS workers spin-wait for 2^28 cycles after start-up and after each
# call before they sleep: on idle cores ≈ 0.1 CPU-s per process for importing numpy
# and ≈ 0.2 more after one small product, a sixth of a cold `ragline search`. 2^4
# lets them sleep at once; a 100k × 384 float32 product stayed as fast (p50 11.6 ms
# against 13.0, a 20k × 384 Gram matrix 36 against 44 ms; 2-core AMD EPYC, load 0.9,
# issue 26's notes). Read when numpy loads, so set before any part of ragline does.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


def _defer_lance_rest_client() -> None:
    """Register LanceDB's REST namespace client (lance-namespace-urllib3-client) as a
    package whose ``__init__`` runs on first use of one of its own names.

    ``import lancedb`` imports its models, and with them the package's ``__init__``,
    which imports every REST API class: 2.1 of lancedb's 3.1 CPU-s at import (issue
    26: a cold ``ragline search`` paid it). ragline opens local folders only, which
    never use those classes; the models (a submodule) still import as usual."""
    import importlib.util
    import sys

    name = "lance_namespace_urllib3_client"
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def load_rest_client(attr: str) -> Any:
        del vars(module)["__getattr__"]
        loader.exec_module(module)
        return getattr(module, attr)

    vars(module)["__getattr__"] = load_rest_client
    sys.modules[name] = module


_defer_lance_rest_client()

if TYPE_CHECKING:
    from ragline.aio import AsyncRagline
    from ragline.answer.answerer import SearchFn
    from ragline.answer.generators.base import (
        Delta,
        GenerationDeadline,
        GenerationError,
        GenerationRequest,
        Generator,
        Message,
    )
    from ragline.answer.generators.local import LocalModelUnavailable
    from ragline.embed.base import Embedder, EmbeddingError, ModelFingerprint
    from ragline.embed.coalesce import QueryBatchEmbedder
    from ragline.engine import AnswerHooks, Ragline
    from ragline.errors import FaultError, InputError, RaglineError
    from ragline.eval.beir import DatasetError
    from ragline.ingest.chunk import Chunker
    from ragline.ingest.errors import IngestError
    from ragline.ingest.ignore import IgnoreFileError
    from ragline.ingest.lock import IngestLockedError
    from ragline.ingest.parse.ocr import OcrUnavailable
    from ragline.ingest.report import ChapterCount, FileFailure, IngestReport
    from ragline.ingest.web.crawl import PageFetcher, RobotsRules
    from ragline.ingest.web.fetch import FetchError
    from ragline.mcp.server import ToolBackend
    from ragline.reader import ReaderError
    from ragline.retrieve.conversation import QueryRewriter, Turn
    from ragline.retrieve.multiquery import QueryExpander
    from ragline.retrieve.rerank import Reranker
    from ragline.serve.querylog import QueryLog, QueryLogError
    from ragline.serve.ratelimit import RateLimiter
    from ragline.settings import Settings
    from ragline.store.base import (
        CandidateQuery,
        Candidates,
        IndexStore,
        ModelMismatchError,
        Store,
        StoreAbilities,
        StoreError,
        StoreInfo,
        StoreMaintenance,
    )
    from ragline.store.filter_ast import FilterError
    from ragline.store.migrate import TargetNotEmptyError
    from ragline.store.url import StoreUrlError
    from ragline.types import (
        Answer,
        Block,
        BlockKind,
        Chunk,
        ChunkDraft,
        Citation,
        Confidence,
        DocumentRecord,
        FieldBoosts,
        Filters,
        Fused,
        Hit,
        ParsedDocument,
        Scalar,
        Scored,
        SearchResult,
        Source,
        StreamEvent,
    )

#: Where each public name lives (imported on first use).
_LOCATIONS: dict[str, str] = {
    # the facade and its settings
    "Ragline": "ragline.engine",
    "AsyncRagline": "ragline.aio",  # the same calls, awaited
    "AnswerHooks": "ragline.engine",  # what one ask changes (a search wrapper...)
    "Settings": "ragline.settings",
    # protocols: one per replaceable part
    "Embedder": "ragline.embed.base",
    "QueryBatchEmbedder": "ragline.embed.coalesce",  # optional: queries embedded together
    "Store": "ragline.store.base",
    "StoreMaintenance": "ragline.store.base",  # compaction, reindex, migration, close
    "IndexStore": "ragline.store.base",  # both: what open_store returns
    "StoreAbilities": "ragline.store.base",  # what a store does beyond the protocol
    "StoreInfo": "ragline.store.base",
    "CandidateQuery": "ragline.store.base",  # one candidate search (Store.candidates)
    "Candidates": "ragline.store.base",
    "Generator": "ragline.answer.generators.base",
    "Reranker": "ragline.retrieve.rerank",
    "Chunker": "ragline.ingest.chunk",
    "SearchFn": "ragline.answer.answerer",
    "QueryLog": "ragline.serve.querylog",
    "RateLimiter": "ragline.serve.ratelimit",
    "PageFetcher": "ragline.ingest.web.crawl",
    "RobotsRules": "ragline.ingest.web.crawl",
    "ToolBackend": "ragline.mcp.server",
    # types
    "Scalar": "ragline.types",
    "Filters": "ragline.types",
    "Answer": "ragline.types",
    "Block": "ragline.types",
    "BlockKind": "ragline.types",
    "Chunk": "ragline.types",
    "ChunkDraft": "ragline.types",
    "Citation": "ragline.types",
    "Confidence": "ragline.types",
    "DocumentRecord": "ragline.types",
    "Hit": "ragline.types",
    "ParsedDocument": "ragline.types",
    "SearchResult": "ragline.types",
    "Source": "ragline.types",
    "StreamEvent": "ragline.types",
    "FieldBoosts": "ragline.types",  # BM25 weight per field (CandidateQuery.boosts)
    "Scored": "ragline.types",  # an entry of a ranked list (ragline.fusion's input)
    "Fused": "ragline.types",  # an entry of a fused ranking (Candidates.fused)
    "ModelFingerprint": "ragline.embed.base",
    "IngestReport": "ragline.ingest.report",
    "FileFailure": "ragline.ingest.report",
    "ChapterCount": "ragline.ingest.report",
    "GenerationRequest": "ragline.answer.generators.base",
    "Delta": "ragline.answer.generators.base",
    "Message": "ragline.answer.generators.base",
    "QueryRewriter": "ragline.retrieve.conversation",
    "Turn": "ragline.retrieve.conversation",
    "QueryExpander": "ragline.retrieve.multiquery",
    # errors
    "RaglineError": "ragline.errors",
    "InputError": "ragline.errors",
    "FaultError": "ragline.errors",
    "IngestError": "ragline.ingest.errors",
    "IgnoreFileError": "ragline.ingest.ignore",
    "IngestLockedError": "ragline.ingest.lock",
    "EmbeddingError": "ragline.embed.base",
    "ReaderError": "ragline.reader",
    "StoreError": "ragline.store.base",
    "ModelMismatchError": "ragline.store.base",
    "StoreUrlError": "ragline.store.url",
    "FilterError": "ragline.store.filter_ast",
    "TargetNotEmptyError": "ragline.store.migrate",
    "GenerationError": "ragline.answer.generators.base",
    "GenerationDeadline": "ragline.answer.generators.base",
    "LocalModelUnavailable": "ragline.answer.generators.local",
    "QueryLogError": "ragline.serve.querylog",
    "FetchError": "ragline.ingest.web.fetch",
    "OcrUnavailable": "ragline.ingest.parse.ocr",
    "DatasetError": "ragline.eval.beir",
}

__all__ = [
    "Answer",
    "AnswerHooks",
    "AsyncRagline",
    "Block",
    "BlockKind",
    "CandidateQuery",
    "Candidates",
    "ChapterCount",
    "Chunk",
    "ChunkDraft",
    "Chunker",
    "Citation",
    "Confidence",
    "DatasetError",
    "Delta",
    "DocumentRecord",
    "Embedder",
    "EmbeddingError",
    "FaultError",
    "FetchError",
    "FieldBoosts",
    "FileFailure",
    "FilterError",
    "Filters",
    "Fused",
    "GenerationDeadline",
    "GenerationError",
    "GenerationRequest",
    "Generator",
    "Hit",
    "IgnoreFileError",
    "IndexStore",
    "IngestError",
    "IngestLockedError",
    "IngestReport",
    "InputError",
    "LocalModelUnavailable",
    "Message",
    "ModelFingerprint",
    "ModelMismatchError",
    "OcrUnavailable",
    "PageFetcher",
    "ParsedDocument",
    "QueryBatchEmbedder",
    "QueryExpander",
    "QueryLog",
    "QueryLogError",
    "QueryRewriter",
    "Ragline",
    "RaglineError",
    "RateLimiter",
    "ReaderError",
    "Reranker",
    "RobotsRules",
    "Scalar",
    "Scored",
    "SearchFn",
    "SearchResult",
    "Settings",
    "Source",
    "Store",
    "StoreAbilities",
    "StoreError",
    "StoreInfo",
    "StoreMaintenance",
    "StoreUrlError",
    "StreamEvent",
    "TargetNotEmptyError",
    "ToolBackend",
    "Turn",
]
__version__ = "0.1.0"


__getattr__ = lazy_getattr("ragline", _LOCATIONS, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
