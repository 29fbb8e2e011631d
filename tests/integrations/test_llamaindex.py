"""RaglineRetriever in LlamaIndex: real llama-index-core, a real index, a real query
engine with LlamaIndex's MockLLM (which answers with its prompt; no network)."""

from __future__ import annotations

from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, TextNode

from ragline.engine import Ragline
from ragline.integrations import hit_metadata
from ragline.integrations.llamaindex import RaglineRetriever

QUESTION = "How much does the sea rise when the air pressure falls?"


def test_nodes_carry_ragline_metadata_and_scores(tides_rag: Ragline) -> None:
    nodes = RaglineRetriever(tides_rag, top_k=3).retrieve(QUESTION)
    hits = tides_rag.search(QUESTION, top_k=3).hits
    assert nodes and len(nodes) == len(hits)
    for scored, hit in zip(nodes, hits, strict=True):
        assert isinstance(scored, NodeWithScore) and isinstance(scored.node, TextNode)
        node = scored.node
        assert scored.score == hit.score and node.node_id == hit.chunk.id
        assert node.text == hit.chunk.text and node.metadata == hit_metadata(hit)
        span = (hit.chunk.start_char, hit.chunk.end_char)
        assert (node.start_char_idx, node.end_char_idx) == span
        assert node.relationships[NodeRelationship.SOURCE].node_id == hit.chunk.doc_id
        assert node.ref_doc_id == hit.chunk.doc_id
    top = nodes[0].node
    assert (top.metadata["title"], top.metadata["section"]) == (
        "Storm Surge",
        "The inverse barometer effect",
    )
    # the LLM sees the title, section and url, not the scores and offsets
    shown = top.get_content(metadata_mode=MetadataMode.LLM)
    assert "title: Storm Surge" in shown and "section: The inverse barometer effect" in shown
    assert "vector_score" not in shown and "start_char" not in shown
    assert top.get_content() == top.text


def test_top_k_filters_and_mode_pass_through(tides_rag: Ragline) -> None:
    assert len(RaglineRetriever(tides_rag, top_k=2, expand=0).retrieve(QUESTION)) == 2
    gauges = RaglineRetriever(tides_rag, filters={"chapter": "Tide Gauges"}).retrieve(QUESTION)
    assert gauges and {n.node.metadata["chapter"] for n in gauges} == {"Tide Gauges"}
    keyword = RaglineRetriever(tides_rag, mode="bm25", top_k=3, expand=0).retrieve(QUESTION)
    assert keyword and all(n.node.metadata["vector_score"] is None for n in keyword)
    assert RaglineRetriever(tides_rag, filters={"tenant": "acme"}).retrieve(QUESTION) == []


def test_a_query_engine_runs_end_to_end(tides_rag: Ragline) -> None:
    retriever = RaglineRetriever(tides_rag, top_k=2, expand=0)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    expected = retriever.retrieve(QUESTION)
    assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in expected]
    assert [n.score for n in response.source_nodes] == [n.score for n in expected]
    # MockLLM answers with the prompt it was given: the retrieved text and the question
    answer = str(response)
    assert expected[0].node.get_content() in answer and "hectopascal" in answer
    assert "title: Storm Surge" in answer and QUESTION in answer
    assert "vector_score" not in answer
