"""Per-language word tools for keyword analysis: stemmers, stop words, CJK segmentation.

Loaders are cached and import their package on first use, so an English-only
index never loads a Japanese dictionary. Everything here works offline: the
Snowball stemmers are code, the stop-word lists ship in ``stopwordsiso``,
``jieba`` ships its dictionary and ``unidic-lite`` the dictionary ``fugashi``
(MeCab) reads. Those three are the ``cjk`` extra: without it, Japanese and Chinese
runs are cut into character bigrams (coarser keyword search, not a failure), and a
one-line warning names the extra.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import snowballstemmer

from ragline.text.language import has_cjk as has_cjk
from ragline.text.language import is_cjk

#: ISO 639-1 code → Snowball algorithm (every language snowballstemmer 3 ships).
SNOWBALL: dict[str, str] = {
    "ar": "arabic",
    "hy": "armenian",
    "eu": "basque",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "nl": "dutch",
    "en": "english",
    "eo": "esperanto",
    "et": "estonian",
    "fi": "finnish",
    "fr": "french",
    "de": "german",
    "el": "greek",
    "hi": "hindi",
    "hu": "hungarian",
    "id": "indonesian",
    "ga": "irish",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "no": "norwegian",
    "nb": "norwegian",
    "fa": "persian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "st": "sesotho",
    "es": "spanish",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}

#: Languages whose accents carry meaning a fold would erase (ı/i, ş/s; Vietnamese tones).
NO_FOLD = frozenset({"tr", "vi"})

#: Languages written without spaces; their Latin-script words (code, product
#: names) are analysed as English, which is what they nearly always are.
CJK_LANGUAGES = frozenset({"ja", "zh", "ko"})

#: Content words that the merged stopwords-iso lists include but technical
#: documentation uses as nouns ("estado" is React's *state*, "valeur" a value).
#: Found by checking the lists against react.dev's Spanish and French pages.
NOT_STOP_WORDS: dict[str, frozenset[str]] = {
    "es": frozenset(
        "estado estados valor valores usar uso tiempo ejemplo ejemplos parte partes "  # noqa: SIM905
        "manera lugar fin nombre nuevo nueva primer primero primera último".split()
    ),
    "fr": frozenset("état états valeur valeurs effet effets façon nom".split()),  # noqa: SIM905
}


@lru_cache(maxsize=64)
def stemmer(language: str) -> Callable[[str], str] | None:
    """The Snowball stemmer's ``stemWord`` for a language, or None when Snowball has none."""
    name = SNOWBALL.get(language)
    if name is None:
        return None
    stem: Callable[[str], str] = snowballstemmer.stemmer(name).stemWord
    return stem


@lru_cache(maxsize=64)
def stop_words(language: str) -> frozenset[str]:
    """The stopwords-iso list of a language (minus :data:`NOT_STOP_WORDS`); empty if none."""
    import stopwordsiso

    if not stopwordsiso.has_lang(language):
        return frozenset()
    words = {unicodedata.normalize("NFKC", w).lower() for w in stopwordsiso.stopwords(language)}
    return frozenset(words - NOT_STOP_WORDS.get(language, frozenset()))


def _has_kana(text: str) -> bool:
    return any("\u3040" <= ch <= "\u30ff" for ch in text)


def _has_hangul(text: str) -> bool:
    return any("\uac00" <= ch <= "\ud7af" for ch in text)


@lru_cache(maxsize=1)
def _mecab() -> Any:
    import fugashi
    import unidic_lite

    return fugashi.Tagger(f'-d "{unidic_lite.DICDIR}"')


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def japanese_words(run: str) -> list[str]:
    """MeCab (UniDic) words of a run, inflected verbs and adjectives as their base form."""
    out: list[str] = []
    for word in _mecab()(run):
        base = getattr(word.feature, "orthBase", None)
        out.append(base if isinstance(base, str) and base and base != "*" else word.surface)
    return out


def chinese_words(run: str) -> list[str]:
    """jieba's search-mode words: a long word and the shorter words inside it, so a
    query for 状态 finds 状态变量."""
    return [w for w in _jieba().cut_for_search(run) if w.strip()]


#: The package each segmenter needs, for the warning when it is missing.
SEGMENTER_PACKAGES = {"ja": "fugashi and unidic-lite", "zh": "jieba"}

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def segmenter_missing(language: str, error: str) -> None:
    """Say once per language that its segmenter is missing and what installs it."""
    name = {"ja": "Japanese", "zh": "Chinese"}.get(language, language)
    log.warning(
        "%s text is split into character pairs: %s not installed (%s); for word-level "
        "keyword search: pip install -e '.[cjk]', then ingest again",
        name,
        SEGMENTER_PACKAGES.get(language, "its segmenter"),
        error,
    )


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs (a lone character stays one term): Korean and any
    CJK text whose language has no segmenter here."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@lru_cache(maxsize=65536)
def segment(run: str, language: str) -> tuple[str, ...]:
    """Words of an unspaced run (it holds CJK characters), by its language and script.

    Kana means Japanese whatever the label says, Hangul Korean; Han alone follows
    the label (Japanese or else Chinese), so a Chinese page quoting 状態 and a
    Japanese one agree with their own queries.
    """
    if language == "ja" or _has_kana(run):
        lang = "ja"
    elif language == "ko" or _has_hangul(run):
        return tuple(_bigram_mixed(run))
    else:
        lang = "zh"
    try:
        return tuple(japanese_words(run) if lang == "ja" else chinese_words(run))
    except ImportError as e:  # the cjk extra is not installed
        segmenter_missing(lang, f"no module named {e.name!r}")
        return tuple(_bigram_mixed(run))


def _bigram_mixed(run: str) -> list[str]:
    """Bigrams over the CJK stretches of a run, its other stretches kept whole."""
    out: list[str] = []
    buf = ""
    cjk = False
    for ch in run + "\0":
        here = is_cjk(ch)
        if buf and (here != cjk or ch == "\0"):
            out.extend(bigrams(buf) if cjk else [buf])
            buf = ""
        if ch != "\0":
            buf += ch
            cjk = here
    return out
