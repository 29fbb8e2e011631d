"""Per-language word tools: stemmers, stop words, segmenters (all offline)."""

from __future__ import annotations

import importlib

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


SAMPLE_TEXT = (
    "running runs ran easily fairly generously connection connections relational "
    "gradients optimisation optimization hopefulness universities arguing "
    "corriendo canciones nacionalidades estaban rápidamente "
    "manger mangeons nationalité heureusement considérablement "
    "laufen häuser wunderschönen gesprochen "
    "бегущий книгами прекрасного δρόμους καλύτερα الكتابات والمكتبة "
    "kitaplarımızdan evlerde juoksemme talossa uitgesproken hoofden "
    "szépségesen könyvekből różnymi książkami mesas útiles"
)
SAMPLE_WORDS = SAMPLE_TEXT.split()


def test_stemmers_are_snowball_in_c_with_the_pure_python_stems() -> None:
    """PyStemmer (libstemmer_c) runs every language's Snowball algorithm, and stems
    exactly as snowballstemmer's own Python code: an index built before gives the
    same terms. A PyStemmer or snowballstemmer update that changes a stem fails here."""
    for name in sorted(set(words.SNOWBALL.values())):
        stem = words.stemmer(next(c for c, n in words.SNOWBALL.items() if n == name))
        assert stem is not None
        assert type(stem.__self__).__module__ == "Stemmer"  # type: ignore[attr-defined]
        module = importlib.import_module(f"snowballstemmer.{name}_stemmer")
        cls = "".join(part.capitalize() for part in name.split("_")) + "Stemmer"
        python = getattr(module, cls)()
        for w in SAMPLE_WORDS:
            assert stem(w) == python.stemWord(w), (name, w)
