"""ragline as a LlamaIndex retriever: ``pip install -e '.[llamaindex]'``.

>>> from llama_index.core.query_engine import RetrieverQueryEngine        # doctest: +SKIP
>>> from ragline.integrations.llamaindex import RaglineRetriever          # doctest: +SKIP
>>> engine = RetrieverQueryEngine.from_args(RaglineRetriever(Ragline()), llm=llm)  # doctest: +SKIP

Each hit becomes a ``NodeWithScore``: a ``TextNode`` with the chunk's id, text and
character span, its document as the SOURCE relationship, and the hit as ragline's API
shows it as metadata (:func:`ragline.integrations.hit_metadata`); the score is the
hit's final ranking score. The LLM sees only the title, section and url of that
metadata (the scores and offsets would be noise in its prompt).
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(
        "ragline.integrations.llamaindex needs llama-index-core: pip install -e '.[llamaindex]'"
    ) from exc

from ragline.answer.answerer import SearchOptions
from ragline.engine import Ragline
from ragline.integrations import hit_metadata, search_options
from ragline.retrieve.retriever import SearchMode
from ragline.types import Filters, Hit

__all__ = ["RaglineRetriever", "hit_node"]

#: The metadata a node shows the LLM (and an embedder, should one re-embed it).
SHOWN_KEYS = ("title", "section", "url")


def hit_node(hit: Hit) -> NodeWithScore:
    """One ragline hit as a scored LlamaIndex node."""
    chunk = hit.chunk
    metadata: dict[str, Any] = hit_metadata(hit)
    hidden = [key for key in metadata if key not in SHOWN_KEYS]
    node = TextNode(
        id_=chunk.id,
        text=chunk.text,
        metadata=metadata,
        excluded_llm_metadata_keys=hidden,
        excluded_embed_metadata_keys=hidden,
        start_char_idx=chunk.start_char,
        end_char_idx=chunk.end_char,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=chunk.doc_id)},
    )
    return NodeWithScore(node=node, score=hit.score)


class RaglineRetriever(BaseRetriever):
    """:meth:`Ragline.search` behind LlamaIndex's retriever interface, for a
    ``RetrieverQueryEngine``, a chat engine or a fusion retriever.

    ``None`` options take the index's settings (``TOP_K``, hybrid search, …); the
    settings' tenant applies unless ``filters`` names one."""

    def __init__(
        self,
        rag: Ragline,
        *,
        top_k: int | None = None,
        filters: Filters | None = None,
        mode: SearchMode | None = None,
        expand: int | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        super().__init__(callback_manager=callback_manager)
        self.rag = rag
        self.options = search_options(
            SearchOptions(top_k=top_k, filters=filters, mode=mode, expand=expand), {}
        )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.rag.search(query_bundle.query_str, **self.options)
        return [hit_node(hit) for hit in result.hits]
