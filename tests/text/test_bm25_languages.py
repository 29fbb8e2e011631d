"""The analyser per language: English unchanged, the others stemmed or segmented."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from ragline.engine import Ragline
from ragline.text.bm25 import chunk_terms, query_counts, split_words, tokenize
from ragline.types import Chunk

SPANISH_PAGE = """# Validar la respuesta

Para validar la respuesta de una ruta, declara el parámetro `response_model` en el
decorador y devuelve el código con status_code. Las dependencias se declaran con
Depends y las tareas en segundo plano con BackgroundTasks; en el cliente, useMemo
y React.memo evitan cálculos repetidos. Las funciones asíncronas se escriben con
async def y se esperan con await.
"""


def _chunk(text: str, language: str | None) -> Chunk:
    meta = {"language": language} if language else {}
    return Chunk(
        id="c",
        doc_id="d",
        tenant="t",
        source="s.md",
        title="",
        chapter="",
        section="",
        heading_path=(),
        url="",
        anchor="",
        chunk_index=0,
        start_char=0,
        end_char=len(text),
        token_count=1,
        word_count=1,
        has_code=False,
        has_equations=False,
        content_hash="",
        created_at="",
        text=text,
        metadata=meta,
    )


def test_english_is_the_default_and_unchanged() -> None:
    text = "Having cafés, the running components"
    assert tokenize(text) == tokenize(text, "en") == ["cafe", "run", "compon"]
    assert chunk_terms(_chunk(text, None))["text"].tf == chunk_terms(_chunk(text, "en"))["text"].tf


def test_spanish_and_french_stem_drop_stop_words_and_fold() -> None:
    assert tokenize("¿Cómo agrego estados a los componentes?", "es") == [
        "agreg",
        "estad",
        "component",
    ]
    assert tokenize("Les états des composants", "fr") == ["etat", "compos"]


def test_cjk_is_segmented_and_latin_words_inside_get_english_analysis() -> None:
    ja = tokenize("useStateフックで状態を追加します。", "ja")
    assert ja == ["usest", "フック", "状態", "追加"]
    zh = tokenize("使用 useState 添加状态。", "zh")
    assert "状态" in zh and "usest" in zh and "添加" in zh


def test_identifiers_in_spanish_prose_keep_their_english_terms() -> None:
    """Spanish stemming made status_code status + cod and useMemo usemem, which an
    English query (status + code, usememo) never matched."""
    terms = tokenize(SPANISH_PAGE, "es")
    for identifier in ["response_model", "status_code", "useMemo", "React.memo", "BackgroundTasks"]:
        assert set(tokenize(identifier, "en")) <= set(terms), identifier
    assert "respuest" in terms and "asincron" in terms  # the prose stays Spanish
    assert tokenize("`fetchData()` devuelve los datos", "es") == ["fetchdata", "devuelv", "dat"]
    # a Spanish question naming an identifier analyses it the English way too
    assert tokenize("¿Cómo uso status_code?", "es") == ["uso", "status", "code"]


def test_identifiers_in_a_spanish_page_are_found_from_english_queries(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "respuesta.md").write_text(SPANISH_PAGE, encoding="utf-8")
    (docs / "otra.md").write_text(
        "# Rutas\n\nUna ruta recibe la petición y devuelve la respuesta al cliente; "
        "los códigos de estado indican si todo salió bien o no.\n",
        encoding="utf-8",
    )
    rag = make_rag()
    assert rag.ingest(docs).ok
    for query in ["status_code", "useMemo", "async def", "response_model", "BackgroundTasks"]:
        result = rag.search(query, mode="bm25")
        assert result.hits, query
        assert result.hits[0].chunk.source.endswith("respuesta.md"), query
        assert result.hits[0].chunk.metadata["language"] == "es"


def test_query_is_analysed_in_its_own_language() -> None:
    doc = chunk_terms(_chunk("コンポーネントに状態を追加するには useState を使います。", "ja"))[
        "text"
    ]
    q = query_counts("コンポーネントに状態を追加するには？")
    assert set(q) <= set(doc.tf) and {"状態", "追加"} <= set(q)
    es = chunk_terms(_chunk("El estado de un componente", "es"))["text"]
    assert set(query_counts("¿Qué es el estado de los componentes?")) <= set(es.tf)
    assert set(query_counts("estados", language="es")) == {"estad"}


def isalnum_runs(text: str) -> list[str]:
    """The definition: maximal runs of characters for which ``str.isalnum`` holds."""
    words, start = [], -1
    for i, ch in enumerate(text):
        if ch.isalnum():
            start = i if start < 0 else start
        elif start >= 0:
            words.append(text[start:i])
            start = -1
    return [*words, text[start:]] if start >= 0 else words


def test_split_words_is_runs_of_alphanumeric_characters() -> None:
    """Every code point splits as ``str.isalnum`` says, alone and between others."""
    every = "".join(map(chr, range(0x110000)))
    assert split_words(every) == isalnum_runs(every)
    for ch in map(chr, range(0x30000)):
        assert split_words(f"a{ch}b") == isalnum_runs(f"a{ch}b")
    rng = random.Random(3)
    alphabet = [chr(rng.randrange(0x30000)) for _ in range(2000)] + list(" _-.,\t0123abcé漢")
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert split_words(text) == isalnum_runs(text)
