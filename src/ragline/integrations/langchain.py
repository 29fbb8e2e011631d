"""ragline as a LangChain retriever: ``pip install -e '.[langchain]'``.

>>> from ragline import Ragline                                         # doctest: +SKIP
>>> from ragline.integrations.langchain import RaglineRetriever         # doctest: +SKIP
>>> retriever = RaglineRetriever(rag=Ragline(), top_k=4)                # doctest: +SKIP
>>> retriever.invoke("how are deleted files removed?")[0].metadata["score"]  # doctest: +SKIP

Each hit becomes a ``Document`` whose ``page_content`` is the chunk's text, whose
``id`` is the chunk id and whose ``metadata`` is the hit as ragline's API shows it
(:func:`ragline.integrations.hit_metadata`: scores, rank, title, section, url, …).
Search options (``top_k``, ``filters``, ``mode``, ``expand``) are fields, and one
call may override them: ``retriever.invoke(q, filters={"chapter": "Guides"})``.
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "ragline.integrations.langchain needs langchain-core: pip install -e '.[langchain]'"
    ) from exc

from ragline.answer.answerer import SearchOptions
from ragline.engine import Ragline
from ragline.integrations import hit_metadata, search_options
from ragline.retrieve.retriever import SearchMode
from ragline.types import Filters, Hit

__all__ = ["RaglineRetriever", "hit_document"]


def hit_document(hit: Hit) -> Document:
    """One ragline hit as a LangChain document."""
    return Document(page_content=hit.chunk.text, metadata=hit_metadata(hit), id=hit.chunk.id)


class RaglineRetriever(BaseRetriever):
    """:meth:`Ragline.search` behind LangChain's retriever interface (a Runnable:
    ``invoke``, ``batch``, ``ainvoke``, and ``|`` in a chain).

    ``None`` options take the index's settings (``TOP_K``, hybrid search, …); the
    settings' tenant applies unless ``filters`` names one."""

    rag: Ragline
    top_k: int | None = None
    filters: Filters | None = None
    mode: SearchMode | None = None
    expand: int | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        defaults = SearchOptions(
            top_k=self.top_k, filters=self.filters, mode=self.mode, expand=self.expand
        )
        result = self.rag.search(query, **search_options(defaults, options))
        return [hit_document(hit) for hit in result.hits]
