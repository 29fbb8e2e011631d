"""BM25 computed by the application, scored exactly like LanceDB's native FTS.

LanceStore lets LanceDB tokenise and score; the SQL and Qdrant stores compute
the same numbers from this module, so every store ranks a keyword query alike
and ``Hit.keyword_score`` means the same thing everywhere.

What LanceDB 0.40 does for ragline's FTS index (``lance_indexes._fts_config``; read
from lance's ``lance-index``/``lance-tokenizer`` sources and checked against a
real table, see ``tests/store/test_contract.py``), in order:

1. ``simple`` tokeniser: split on every character that is not alphanumeric
   (Unicode letters and numbers; ``_``, ``'``, ``-`` and ``.`` split).
2. Drop tokens of 40 or more UTF-8 bytes (``max_token_length=40``).
3. Lower-case character by character (no final-sigma rule).
4. English Snowball ("Porter 2") stemming.
5. Drop the token when its *stem* is an English stop word (NLTK's list), so
   ``having`` goes (stem ``have``) while ``very`` stays (stem ``veri``).
6. ASCII folding of Latin letters (``café`` → ``cafe``, ``ß`` → ``ss``);
   other scripts are kept as they are.

Scoring (lance ``scorer.rs``), per field, over that field's own statistics::

    idf(t)   = ln(1 + (N − df + 0.5) / (df + 0.5))
    w(tf,dl) = (k1 + 1)·tf / (tf + k1·(1 − b + b·dl/avgdl))     k1 = 1.2, b = 0.75
    bm25_f   = Σ over query tokens (repeats count) idf(t)·w(tf_t, dl)

with N the number of chunks whose field has at least one token (an empty or
stop-words-only field is no document of that field), df the chunks whose field
holds t, dl the field's token count (after stop-word removal) and avgdl its mean
over those N chunks. LanceDB folds new and deleted rows into these statistics at
``optimize()``; until then they lag, so scores are exact after ``optimize()``. The
(k1 + 1) factor is the classic Robertson form that LanceDB keeps (Lucene ≥ 8
drops it); it scales every score alike and changes no ranking. Fields are
combined the way LanceDB's ``MultiMatchQuery`` does: a chunk's score is the
**best boosted field**, ``max_f boost_f·bm25_f`` (not a sum).

Languages (this module is ragline's one analyser: every store and the query
side use it). The steps above are the **English** analysis, kept exactly so
English scores still equal LanceDB's. A chunk's ``metadata["language"]`` (set
at ingest, :mod:`ragline.text.language`) picks its analysis, and a query is
analysed in its own detected language:

* Snowball languages: lower-case, drop stop words (stopwords-iso lists, checked
  on the word), Snowball stem, fold accents (except Turkish and Vietnamese).
* Japanese, Chinese, Korean: a run holding CJK characters is segmented
  (MeCab/UniDic base forms, jieba search mode, character bigrams) and the
  words on the language's stop list dropped; Latin words inside such text
  (code, product names) get the English analysis.
* Other languages: lower-case and fold only.

Differences that remain, documented rather than hidden: the tokeniser tests
"alphanumeric" with Python's ``str.isalnum`` where Rust uses the Unicode
Alphabetic property (they differ only on combining vowel signs of Indic and
similar scripts), and folding uses Unicode decomposition plus a table of the
letters it misses, which covers Latin text but not every symbol Lucene folds.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from ragline.text import words as lang_words
from ragline.text.language import normalize_language, query_language
from ragline.types import Chunk

#: BM25 parameters LanceDB uses (fixed there; app-side stores may honour settings).
K1 = 1.2
B = 0.75
#: Tokens of this many UTF-8 bytes or more are dropped (LanceDB's max_token_length).
MAX_TOKEN_BYTES = 40
#: The BM25 fields of a chunk, in the order boosts are given (FieldBoosts).
KEYWORD_FIELDS = ("title", "headings", "text")

#: NLTK's English stop words, the list LanceDB applies (to stems). Words with an
#: apostrophe can never be tokens (``'`` splits), so they are left out.
STOP_WORDS: frozenset[str] = frozenset(
    """a about above after again against ain all am an and any are aren as at be because
    been before being below between both but by can couldn d did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having
    he her here hers herself him himself his how i if in into is isn it its itself just
    ll m ma me mightn more most mustn my myself needn no nor not now o of off on once
    only or other our ours ourselves out over own re s same shan she should shouldn so
    some such t than that the their theirs them themselves then there these they this
    those through to too under until up ve very was wasn we were weren what when where
    which while who whom why will with won wouldn y you your yours yourself yourselves""".split()  # noqa: SIM905
)

#: Latin letters that Unicode decomposition does not reduce to ASCII but
#: Lucene's ASCIIFoldingFilter (LanceDB's ascii_folding) does.
_FOLD_EXTRA = {
    "ß": "ss",
    "ẞ": "SS",
    "æ": "ae",
    "Æ": "AE",
    "œ": "oe",
    "Œ": "OE",
    "ø": "o",
    "Ø": "O",
    "đ": "d",
    "Đ": "D",
    "ð": "d",
    "Ð": "D",
    "ł": "l",
    "Ł": "L",
    "þ": "th",
    "Þ": "TH",
    "ħ": "h",
    "Ħ": "H",
    "ı": "i",
    "ĸ": "q",
    "ŋ": "n",
    "Ŋ": "N",
    "ŧ": "t",
    "Ŧ": "T",
    "ſ": "s",
    "ƒ": "f",
    "ĳ": "ij",
    "Ĳ": "IJ",
}

_STEMMER = snowballstemmer.stemmer("english")
#: A word: a run of alphanumeric characters (``\w`` less the underscore).
_WORD_RUN = re.compile(r"[^\W_]+")


# ------------------------------------------------------------------ tokenising


def split_words(text: str) -> list[str]:
    r"""Maximal runs of alphanumeric characters (LanceDB's ``simple`` tokeniser): runs
    of ``str.isalnum`` characters, which is what ``[^\W_]`` matches (every code point
    checked, tests/store/test_bm25_languages.py); the regex is twice as fast as a loop."""
    return _WORD_RUN.findall(text)


@lru_cache(maxsize=65536)
def _fold_char(ch: str) -> str:
    if ch in _FOLD_EXTRA:
        return _FOLD_EXTRA[ch]
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    return base if base and base.isascii() else ch


def ascii_fold(token: str) -> str:
    """Latin letters with diacritics (and ligatures, full-width forms) as ASCII."""
    if token.isascii():
        return token
    return "".join(_fold_char(ch) for ch in token)


def _lower(word: str) -> str:
    # Character by character, like Rust's char::to_lowercase (str.lower() would
    # turn a word-final Σ into ς and the terms would no longer match).
    return word.lower() if word.isascii() else "".join(ch.lower() for ch in word)


#: The analysis used when a text's language is not known (and LanceDB's own).
DEFAULT_LANGUAGE = "en"


@lru_cache(maxsize=262144)
def analyze_word(word: str, language: str = DEFAULT_LANGUAGE) -> str | None:
    """One word as an index term, or None when it is dropped (too long, stop word).

    ``word`` is one run of :func:`split_words` without CJK characters; those
    go through :func:`analyze_run`.
    """
    if len(word.encode("utf-8")) >= MAX_TOKEN_BYTES:
        return None
    if language == DEFAULT_LANGUAGE or language in lang_words.CJK_LANGUAGES or not language:
        stem: str = _STEMMER.stemWord(_lower(word))
        if stem in STOP_WORDS:
            return None
        return ascii_fold(stem)
    low = _lower(word)
    if low in lang_words.stop_words(language):
        return None
    stem_word = lang_words.stemmer(language)
    term = stem_word(low) if stem_word is not None else low
    return term if language in lang_words.NO_FOLD else ascii_fold(term)


def analyze_run(run: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """Index terms of one :func:`split_words` run (several when it holds CJK text)."""
    if not lang_words.has_cjk(run):
        term = analyze_word(run, language)
        return [] if term is None else [term]
    out: list[str] = []
    for piece in lang_words.segment(run, language):
        for part in split_words(piece):
            if not lang_words.has_cjk(part):
                latin = analyze_word(part, DEFAULT_LANGUAGE)
                if latin is not None:
                    out.append(latin)
                continue
            low = _lower(unicodedata.normalize("NFKC", part))
            cjk_language = language if language in lang_words.CJK_LANGUAGES else "zh"
            if low not in lang_words.stop_words(cjk_language):
                out.append(low)
    return out


#: Code inside prose of any language: fenced blocks, inline code, and identifiers
#: (snake_case, camelCase/PascalCase with an inner capital, dotted names, calls).
#: Their words are analysed as English whatever the chunk's language, so that
#: ``response_model`` or ``useMemo`` in a Spanish page gives the terms an English
#: query makes of them (Spanish stemming turns ``status_code`` into status + cod).
_CODE_SPAN = re.compile(
    r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]*`"
    r"|[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+"
    r"|[A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"
    r"|[A-Za-z_][A-Za-z0-9_]*(?=\()",
    re.S,
)


def tokenize(text: str | None, language: str | None = None) -> list[str]:
    """Index terms of a text, in order, repeats kept (query and document side alike).

    ``language`` (ISO 639-1) picks the analysis; None means English. In a language
    with its own word analysis (not English, not CJK, whose Latin words are English
    already), code and identifiers (:data:`_CODE_SPAN`) get the English one.
    """
    if not text:
        return []
    lang = normalize_language(language) or DEFAULT_LANGUAGE
    if lang == DEFAULT_LANGUAGE or lang in lang_words.CJK_LANGUAGES:
        return _tokenize(text, lang)
    out: list[str] = []
    start = 0
    for code in _CODE_SPAN.finditer(text):
        out.extend(_tokenize(text[start : code.start()], lang))
        out.extend(_tokenize(code.group(), DEFAULT_LANGUAGE))
        start = code.end()
    out.extend(_tokenize(text[start:], lang))
    return out


def _tokenize(text: str, lang: str) -> list[str]:
    out: list[str] = []
    for word in split_words(text):
        if lang == DEFAULT_LANGUAGE and word.isascii():
            term = analyze_word(word)  # the common case, kept on its fast path
            if term is not None:
                out.append(term)
        else:
            out.extend(analyze_run(word, lang))
    return out


def chunk_language(chunk: Chunk) -> str:
    """The language a chunk's fields are analysed in (its ingest-time ``language``)."""
    lang = chunk.metadata.get("language") if chunk.metadata else None
    return normalize_language(lang) if isinstance(lang, str) else DEFAULT_LANGUAGE


def chunk_fields(chunk: Chunk) -> dict[str, str]:
    """The text each BM25 field of a chunk is indexed from (same strings as LanceStore)."""
    return {
        "title": chunk.title or "",
        "headings": " > ".join(h for h in chunk.heading_path if h),
        "text": chunk.text or "",
    }


@dataclass(frozen=True, slots=True)
class FieldTerms:
    """A field's term frequencies and its length in tokens (after stop words)."""

    tf: Mapping[str, int]
    length: int

    @classmethod
    def of(cls, text: str | None, language: str | None = None) -> FieldTerms:
        tokens = tokenize(text, language)
        return cls(tf=Counter(tokens), length=len(tokens))


def chunk_terms(chunk: Chunk) -> dict[str, FieldTerms]:
    """Term frequencies of each BM25 field of a chunk, in the chunk's language."""
    lang = chunk_language(chunk)
    return {name: FieldTerms.of(text, lang) for name, text in chunk_fields(chunk).items()}


# ------------------------------------------------------------------- scoring


def idf(df: int, n: int) -> float:
    """Inverse document frequency ``ln(1 + (N − df + 0.5)/(df + 0.5))`` (never negative)."""
    if df <= 0 or n <= 0:
        return 0.0
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def tf_weight(tf: int, length: int, avgdl: float, k1: float = K1, b: float = B) -> float:
    """Saturated, length-normalised term frequency ``(k1+1)·tf / (tf + k1·(1−b+b·dl/avgdl))``."""
    if tf <= 0:
        return 0.0
    norm = k1 * (1.0 - b + b * length / avgdl) if avgdl > 0 else k1 * (1.0 - b)
    return (k1 + 1.0) * tf / (tf + norm)


def field_score(
    query: Sequence[str],
    terms: FieldTerms,
    df: Mapping[str, int],
    n: int,
    avgdl: float,
    k1: float = K1,
    b: float = B,
) -> float:
    """BM25 of one field for tokenised ``query`` (repeated query tokens count again)."""
    total = 0.0
    for term in query:
        tf = terms.tf.get(term, 0)
        if tf:
            total += idf(df.get(term, 0), n) * tf_weight(tf, terms.length, avgdl, k1, b)
    return total


def combine_fields(scores: Mapping[str, float], boosts: Mapping[str, float]) -> float:
    """A chunk's score from its field scores: the best boosted field (LanceDB's MultiMatch)."""
    return max((boosts.get(f, 0.0) * s for f, s in scores.items() if s > 0), default=0.0)


@dataclass(frozen=True, slots=True)
class FieldStats:
    """Corpus statistics of one field: chunk count, document frequencies, mean length."""

    n: int
    df: Mapping[str, int]
    avgdl: float

    @classmethod
    def of(cls, fields: Iterable[FieldTerms]) -> FieldStats:
        df: Counter[str] = Counter()
        n = total = 0
        for f in fields:
            if not f.length:
                continue  # LanceDB leaves token-less fields out of N and avgdl
            n += 1
            total += f.length
            df.update(f.tf.keys())
        return cls(n=n, df=dict(df), avgdl=total / n if n else 0.0)


def query_counts(query: str, language: str | None = None) -> Counter[str]:
    """Query terms with how often each occurs (a repeated term weighs more).

    The query is analysed in ``language``, or in its own detected language.
    """
    return Counter(tokenize(query, language or query_language(query)))


def term_id(term: str, space: int = 2**32) -> int:
    """A stable integer id in ``[0, space)`` for a term (sparse-vector dimension).

    First bytes of BLAKE2b: independent of Python's hash seed and of the process,
    so ids agree across runs and stores. Two distinct terms share an id with
    probability ``V/space`` for a vocabulary of V terms (≈ 2·10⁻⁵ at 100k terms
    and 2³² ids); both then count as one term.
    """
    if space < 2:
        raise ValueError(f"space must be at least 2, got {space}")
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % space
