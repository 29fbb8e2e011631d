"""The eval index: built through the real pipeline, reused by key, resumed after a stop."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ragline.embed.base import Embedder, ModelFingerprint, Vectors
from ragline.eval.beir import BeirDocument, load_beir
from ragline.eval.index import MANIFEST, document_body, indexed_text, open_eval_index
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

    @property
    def window_tokens(self) -> int:
        return self.inner.window_tokens

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


def test_marker_names_its_store(beir_dir: Path, tmp_path: Path, embedder: Embedder) -> None:
    """The marker lives in the cache folder, the index where STORE_URL points: a
    marker written for one store must not vouch for another one."""
    ds = load_beir(beir_dir, "test")
    corpus = list(ds.corpus.values())
    counting = CountingEmbedder(embedder)
    base = Settings(eval_cache_dir=tmp_path / "cache")
    in_a = base.model_copy(update={"store_url": f"lance://{tmp_path / 'a'}"})
    in_b = base.model_copy(update={"store_url": f"lance://{tmp_path / 'b'}"})

    first = open_eval_index(corpus, ds.corpus_hash, "tiny", in_a, counting)
    first.close()
    marker = tmp_path / "cache" / first.key[:16] / MANIFEST
    assert json.loads(marker.read_text())["store"] == f"lance://{tmp_path / 'a' / 'lance'}"

    other = open_eval_index(corpus, ds.corpus_hash, "tiny", in_b, counting)
    assert not other.reused and other.chunks == 5 and counting.passages == 10
    other.close()
    assert json.loads(marker.read_text())["store"] == f"lance://{tmp_path / 'b' / 'lance'}"

    # Back in store a: the marker speaks for b, so a's index is checked document by
    # document (its documents are all there: nothing is embedded again), not trusted.
    back = open_eval_index(corpus, ds.corpus_hash, "tiny", in_a, counting)
    assert not back.reused and back.chunks == 5 and counting.passages == 10
    back.close()
    assert json.loads(marker.read_text())["store"] == f"lance://{tmp_path / 'a' / 'lance'}"


def test_indexed_text_is_what_chunk_offsets_refer_to(tmp_path: Path, embedder: Embedder) -> None:
    """Citation spans are located in this text: with Windows line ends in the corpus,
    the raw body is shifted against the chunks' offsets, the indexed text is not."""
    doc = BeirDocument("w1", "Line ends", "First line.\r\nSecond line.\r\nThird line.")
    index = open_eval_index(
        [doc], "crlf", "crlf", Settings(eval_cache_dir=tmp_path / "cache"), embedder
    )
    try:
        chunks = [h.chunk for h in index.rag.search("third line", mode="bm25").hits]
    finally:
        index.close()
    assert chunks
    for c in chunks:
        assert "\r" not in c.text and c.text.endswith("Third line.")
        assert indexed_text(doc)[c.start_char : c.end_char] == c.text
        assert document_body(doc)[c.start_char : c.end_char] != c.text


def test_a_markdown_document_is_indexed_as_ingest_parses_it(
    tmp_path: Path, embedder: Embedder
) -> None:
    """``"format": "markdown"``: front-matter title, headings as sections, site
    markup cleaned (a docs set evaluated the way a user indexes it); the plain-text
    path would index the front matter and the ``{#anchor}`` as words."""
    text = (
        "---\ntitle: Rendering Lists\n---\n\n"
        "## Keeping items in order {#keeping-order}\n\n"
        "Give each item a *stable* key so the list keeps its state.\n"
    )
    doc = BeirDocument("m1", "", text, markdown=True)
    index = open_eval_index(
        [doc], "md", "md", Settings(eval_cache_dir=tmp_path / "cache"), embedder
    )
    try:
        hits = index.rag.search("stable key list state", mode="bm25").hits
    finally:
        index.close()
    assert hits
    chunk = hits[0].chunk
    assert chunk.title == "Rendering Lists" and chunk.section == "Keeping items in order"
    assert "{#" not in chunk.text and "title:" not in chunk.text
    assert indexed_text(doc)[chunk.start_char : chunk.end_char] == chunk.text


def test_a_chunk_keeps_its_language_so_bm25_stems_it_as_ingest_does(
    tmp_path: Path, embedder: Embedder
) -> None:
    """A Spanish corpus line is analysed in Spanish, as ingest analyses a Spanish file:
    "actualización automática de paquetes" and the question's "actualización
    automática" meet as Spanish stems. The eval used to drop the chunk's language
    (format 2), so Spanish text was analysed as English and this document ranked
    below one that only repeats "paquete"."""
    docs = [
        BeirDocument(
            "auto",
            "Descarga y actualización automática de paquetes",
            "El paquete apt incluye un archivo de órdenes cron que se encarga de la descarga "
            "automática de paquetes. Puede mejorarse para la actualización automática de "
            "paquetes instalando el paquete unattended-upgrades.",
        ),
        BeirDocument(
            "view",
            "Visualización de paquetes",
            "En el modo interactivo, los paquetes que se enumeran se muestran con la bandera "
            "del paquete, el nombre del paquete, la versión actual del paquete y la versión "
            "candidata del paquete; cada paquete ocupa una línea.",
        ),
    ]
    index = open_eval_index(docs, "es", "es", Settings(eval_cache_dir=tmp_path / "cache"), embedder)
    try:
        hits = index.rag.search(
            "¿Qué paquete realiza la actualización automática de paquetes?", mode="bm25"
        ).hits
    finally:
        index.close()
    assert {h.chunk.metadata.get("language") for h in hits} == {"es"}
    assert hits[0].chunk.metadata["corpus_id"] == "auto"


def test_the_same_corpus_under_another_name_gets_its_own_index(
    tmp_path: Path, embedder: Embedder
) -> None:
    """Two folders holding the same corpus (a same-language set and a cross-language
    set over one English corpus): the name is in every chunk's source, so the second
    folder reusing the first's index mapped no hit to a document and scored 0."""
    docs = [
        BeirDocument("d1", "Links", "A hard link is a second name for the same file."),
        BeirDocument("d2", "Aliases", "An alias is a short name for a long command."),
    ]
    settings = Settings(eval_cache_dir=tmp_path / "cache")
    first = open_eval_index(docs, "same", "en", settings, embedder)
    first.close()
    second = open_eval_index(docs, "same", "en-x", settings, embedder)
    try:
        hits = second.rag.search("hard link", mode="bm25").hits
        assert not second.reused and second.key != first.key
        assert [second.doc_of[h.chunk.doc_id] for h in hits][:1] == ["d1"]
    finally:
        second.close()
