"""RaglineRetriever in LangChain: real langchain-core, a real index, a real chain."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from ragline.engine import Ragline
from ragline.integrations import hit_metadata
from ragline.integrations.langchain import RaglineRetriever

QUESTION = "How much does the sea rise when the air pressure falls?"


def test_documents_carry_ragline_metadata_and_scores(tides_rag: Ragline) -> None:
    docs = RaglineRetriever(rag=tides_rag, top_k=3).invoke(QUESTION)
    hits = tides_rag.search(QUESTION, top_k=3).hits
    assert docs and len(docs) == len(hits)
    for doc, hit in zip(docs, hits, strict=True):
        assert isinstance(doc, Document)
        assert doc.id == hit.chunk.id and doc.page_content == hit.chunk.text
        assert doc.metadata == hit_metadata(hit)
        assert doc.metadata["score"] == hit.score and "text" not in doc.metadata
    top = docs[0].metadata
    assert (top["title"], top["section"]) == ("Storm Surge", "The inverse barometer effect")
    assert top["rank"] == 1 and top["vector_score"] is not None
    assert top["source"].endswith("storms.md") and top["url"]


def test_top_k_filters_and_mode_pass_through(tides_rag: Ragline) -> None:
    two = RaglineRetriever(rag=tides_rag, top_k=2, expand=0).invoke(QUESTION)
    assert len(two) == 2
    gauges = RaglineRetriever(rag=tides_rag, filters={"chapter": "Tide Gauges"})
    docs = gauges.invoke(QUESTION)
    assert docs and {d.metadata["chapter"] for d in docs} == {"Tide Gauges"}
    # one call overrides the fields
    storms = gauges.invoke(QUESTION, filters={"chapter": "Storm Surge"}, top_k=1, expand=0)
    assert [d.metadata["chapter"] for d in storms] == ["Storm Surge"]
    keyword = RaglineRetriever(rag=tides_rag, mode="bm25", top_k=3, expand=0).invoke(QUESTION)
    assert keyword and all(d.metadata["vector_score"] is None for d in keyword)
    assert all(d.metadata["keyword_score"] for d in keyword)
    # the tenant is a filter like any other: another tenant's retriever sees nothing
    assert RaglineRetriever(rag=tides_rag, filters={"tenant": "acme"}).invoke(QUESTION) == []


def test_an_unknown_option_is_an_error_naming_it(tides_rag: Ragline) -> None:
    with pytest.raises(TypeError, match=r"unknown search option.*top_n"):
        RaglineRetriever(rag=tides_rag).invoke(QUESTION, top_n=3)


def test_batch_and_async(tides_rag: Ragline) -> None:
    retriever = RaglineRetriever(rag=tides_rag, top_k=2, expand=0)
    first, second = retriever.batch([QUESTION, "Which datum do charts use?"])
    assert first[0].metadata["title"] == "Storm Surge" and len(second) == 2
    assert [d.id for d in asyncio.run(retriever.ainvoke(QUESTION))] == [d.id for d in first]


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(
        f"[{i}] {d.metadata['title']} > {d.metadata['section']}\n{d.page_content}"
        for i, d in enumerate(docs, 1)
    )


def test_a_retrieval_chain_runs_end_to_end(tides_rag: Ragline) -> None:
    """retriever | format → prompt → chat model → parser, the LCEL way; the fake model
    repeats its prompt, so the answer shows what the chain retrieved and passed on."""
    retriever = RaglineRetriever(rag=tides_rag, top_k=2, expand=0)
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer only from the context and cite it as [n]."),
            ("human", "Context:\n{context}\n\nQuestion: {question}"),
        ]
    )
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | ParrotFakeChatModel()
        | StrOutputParser()
    )
    answer = chain.invoke(QUESTION)
    top = retriever.invoke(QUESTION)[0]
    assert answer.startswith("Context:\n[1] Storm Surge > The inverse barometer effect\n")
    assert top.page_content in answer and "hectopascal" in answer
    assert answer.endswith(f"Question: {QUESTION}")
