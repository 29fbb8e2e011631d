"""The eval index: built through the real pipeline, reused by key, resumed after a stop."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ragline.embed.base import Embedder, ModelFingerprint, Vectors
from ragline.eval.beir import BeirDocument, load_beir
from ragline.eval.index import MANIFEST, document_body, open_eval_index
from ragline.settings import Settings


class CountingEmbedder:
    """The real embedder, counting the passages it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.passages = 0

    @property
    def fingerprint(self) -> ModelFingerprint:
        return self.inner.fingerprint

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.passages += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def test_build_reuse_and_resume(beir_dir: Path, tmp_path: Path, embedder: Embedder) -> None:
    ds = load_beir(beir_dir, "test")
    corpus = list(ds.corpus.values())
    settings = Settings(eval_cache_dir=tmp_path / "cache")
    counting = CountingEmbedder(embedder)

    first = open_eval_index(corpus, ds.corpus_hash, "tiny", settings, counting)
    assert (first.reused, first.documents, first.chunks, counting.passages) == (False, 5, 5, 5)
    hits = first.rag.search("waggle dance of honey bees", mode="bm25").hits
    assert first.doc_of[hits[0].chunk.doc_id] == "d3"
    assert hits[0].chunk.title == "Insect behaviour"
    assert hits[0].chunk.text.startswith("Insect behaviour\n\nHoney bees")
    first.close()

    again = open_eval_index(corpus, ds.corpus_hash, "tiny", settings, counting)
    assert again.reused and again.key == first.key and counting.passages == 5
    again.close()

    # A stop before the manifest said "complete": the next run embeds nothing twice.
    manifest = tmp_path / "cache" / first.key[:16] / MANIFEST
    manifest.write_text(json.dumps({"key": first.key, "complete": False}))
    resumed = open_eval_index(corpus, ds.corpus_hash, "tiny", settings, counting)
    assert not resumed.reused and resumed.chunks == 5 and counting.passages == 5
    resumed.close()

    # Other chunking settings: another index.
    other = settings.model_copy(update={"chunker": "recursive"})
    rechunked = open_eval_index(corpus, ds.corpus_hash, "tiny", other, counting)
    assert rechunked.key != first.key and not rechunked.reused and counting.passages == 10
    rechunked.close()


def test_document_body_is_a_title_line_then_the_text() -> None:
    assert document_body(BeirDocument("1", "T", "Body.")) == "T\n\nBody."
    assert document_body(BeirDocument("2", "", "Body.")) == "Body."
    assert document_body(BeirDocument("3", "Only a title", " ")) == "Only a title"
