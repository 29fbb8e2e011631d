"""Per-language word tools: stemmers, stop words, segmenters (all offline)."""

from __future__ import annotations

from ragline.text import words


def test_snowball_covers_the_european_languages() -> None:
    for code in ("en", "es", "fr", "de", "pt", "it", "ru"):
        stem = words.stemmer(code)
        assert stem is not None, code
    assert words.stemmer("ja") is None
    assert words.stemmer("es")("componentes") == words.stemmer("es")("componente")


def test_stop_words_keep_content_words() -> None:
    es = words.stop_words("es")
    assert "de" in es and "cómo" in es
    assert "estado" not in es  # React's "state"
    assert "の" in words.stop_words("ja")
    assert words.stop_words("xx") == frozenset()


def test_segmenters() -> None:
    ja = words.segment("状態を追加しました", "ja")
    assert "状態" in ja and "追加" in ja
    assert "する" in ja  # inflected verb as its base form
    zh = words.segment("状态变量", "zh")
    assert "状态" in zh and "状态变量" in zh  # search mode: the word and its parts
    assert words.segment("상태를", "ko") == ("상태", "태를")
    assert words.bigrams("상") == ["상"]
