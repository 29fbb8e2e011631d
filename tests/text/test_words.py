"""Per-language word tools: stemmers, stop words, segmenters (all offline)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

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


# A Python without the cjk extra: the three packages' imports fail as if absent.
WITHOUT_CJK = """
import importlib.abc, json, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"jieba", "fugashi", "unidic_lite"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Absent())
from ragline.text.bm25 import tokenize

print(json.dumps({
    "ja": [tokenize("状態を追加しました", "ja"), tokenize("状態を追加", "ja")],
    "zh": tokenize("状态变量", "zh"),
    "en": tokenize("Deleted files", "en"),
}, ensure_ascii=False))
"""


def test_without_the_cjk_extra_text_is_split_into_character_pairs() -> None:
    """jieba, fugashi and unidic-lite are the cjk extra: without them a Japanese or
    Chinese text is searched by character bigrams, with one warning line per language
    naming the extra, and nothing fails."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_CJK], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    first, second = got["ja"]
    assert {"状態", "態を", "追加"} <= set(first) and "する" not in first, first
    assert {"状態", "追加"} <= set(second)
    assert {"状态", "态变", "变量"} <= set(got["zh"]) and "状态变量" not in got["zh"]
    assert got["en"]  # other languages untouched
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr  # once per language, not once per text
    assert all("pip install -e '.[cjk]'" in line for line in lines), lines
    assert "Japanese" in lines[0] and "fugashi" in lines[0] and "Chinese" in lines[1]


def test_the_cjk_extra_holds_the_segmenters() -> None:
    """The segmenters are an extra (not every install needs 50 MB of dictionary)."""
    pyproject = tomllib.loads(
        (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text("utf-8")
    )
    deps = " ".join(pyproject["project"]["dependencies"])
    cjk = pyproject["project"]["optional-dependencies"]["cjk"]
    for package in ("jieba", "fugashi", "unidic-lite"):
        assert package not in deps and any(d.startswith(f"{package}==") for d in cjk)
