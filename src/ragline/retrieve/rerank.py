"""Reorder the head of a ranking with a finer (slower) relevance signal.

Three rerankers share one protocol: :class:`HeuristicReranker` needs no model
(cosine similarity blended with query-term overlap) and is the default;
:class:`ReaderReranker` scores (query, passage) pairs with ragline's own reader;
:class:`CrossEncoderReranker` with a local sentence-transformers cross-encoder.
:func:`make_reranker` picks one from the settings, the only place that choice is made.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ragline.text.bm25 import split_words
from ragline.types import Chunk, Hit

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder

    from ragline.settings import Settings


@runtime_checkable
class Reranker(Protocol):
    """Scores ``hits`` against ``query`` and returns the best ``top_k``.

    Implementations return new hits with ``rerank_score``, ``score`` (= the rerank
    score) and ``rank`` (1-based) set, best first; inputs are not mutated.
    """

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]: ...


def _check_top_k(top_k: int) -> None:
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")


def _reordered(hits: list[Hit], scores: list[float], top_k: int) -> list[Hit]:
    """Hits sorted by score (ties keep the incoming order), cut to top_k, re-ranked."""
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))[:top_k]
    return [
        replace(hits[i], score=scores[i], rerank_score=scores[i], rank=r)
        for r, i in enumerate(order, start=1)
    ]


# --- text normalisation for keyword overlap ------------------------------------------

# Common English function words: they match everywhere, so they say nothing.
_STOP_WORDS_TEXT = """
a about above after again against all am an and any are as at be because been
before being below between both but by can could did do does doing down during each
few for from further had has have having he her here hers herself him himself his
how i if in into is it its itself just me more most my myself no nor not now of off
on once only or other our ours ourselves out over own same she should so some such
than that the their theirs them themselves then there these they this those through
to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

_VOWEL = re.compile(r"[aeiouy]")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English suffix stripper (plurals, -ing, -ed, -ation, final -e).

    Not Porter: it only has to map a query word and its variants in a passage to
    one key ("normalizing", "normalized", "normalization", "normalize" →
    "normaliz"), and to leave short words alone. Expects lower-case input.
    """
    w = word
    if len(w) <= 2:
        return w
    if len(w) > 3:  # plurals; three-letter words (gas, bus, has) are left alone
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
    for suffix in ("ation", "ing", "ed"):
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if len(base) >= 2 and _VOWEL.search(base):
                if suffix == "ed" and base.endswith("i"):
                    base = base[:-1] + "y"  # studied → study
                elif base[-1] == base[-2] and base[-1] not in "aeiouylsz":
                    base = base[:-1]  # running → run
                w = base
            break
    if w.endswith("e") and len(w) > 2:
        w = w[:-1]
    return w


def content_terms(text: str) -> set[str]:
    """Stemmed, lower-cased words of ``text`` without stop words."""
    return {stem(t) for t in split_words(text.lower()) if t not in STOP_WORDS}


def _chunk_terms(chunk: Chunk) -> set[str]:
    return content_terms(" ".join((chunk.title, *chunk.heading_path, chunk.text)))


def keyword_overlap(query_terms: set[str], chunk: Chunk) -> float:
    """Fraction of the query's content terms found in the chunk's text, title or
    headings (0.0 when the query has none)."""
    if not query_terms:
        return 0.0
    return len(query_terms & _chunk_terms(chunk)) / len(query_terms)


class HeuristicReranker:
    """``alpha · cosine + (1 − alpha) · overlap``, with no model to load.

    Cosine similarity (``Hit.vector_score``) captures meaning; the overlap (share
    of the query's content terms present in the chunk) rewards passages that name
    what was asked, which dense models blur. Where one signal is unknown (a hit
    without ``vector_score``, or a query made only of stop words) the score is the
    other signal alone rather than a penalty; with neither, the incoming order is
    kept. Deterministic: ties keep the incoming order.
    """

    def __init__(self, alpha: float = 0.7) -> None:
        if not (math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
            raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
        self.alpha = alpha

    def score(self, query_terms: set[str], hit: Hit) -> float:
        """One hit's heuristic score for a query already turned into terms."""
        similarity = hit.vector_score
        if not query_terms:
            return 0.0 if similarity is None else float(similarity)
        overlap = keyword_overlap(query_terms, hit.chunk)
        if similarity is None:
            return overlap
        return self.alpha * float(similarity) + (1.0 - self.alpha) * overlap

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        _check_top_k(top_k)
        terms = content_terms(query)
        return _reordered(hits, [self.score(terms, h) for h in hits], top_k)


def passage_text(chunk: Chunk) -> str:
    """What the cross-encoder reads: ``Title > Section`` then the chunk text."""
    head = " > ".join(p for p in dict.fromkeys((chunk.title, chunk.section)) if p)
    return f"{head}\n{chunk.text}" if head else chunk.text


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder loaded from a local folder.

    The model is loaded on first use (so building a pipeline stays cheap) and only
    from disk: ragline never downloads models at run time. Needs the ``st`` extra.
    """

    def __init__(self, model_path: str, batch_size: int = 16, max_length: int = 512) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        self.model_path = model_path
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: CrossEncoder | None = None
        self._lock = threading.Lock()

    def _load(self) -> CrossEncoder:
        with self._lock:
            if self._model is not None:
                return self._model
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise ImportError(
                    "the cross-encoder reranker needs sentence-transformers: install the "
                    "'st' extra (pip install -e '.[st]')"
                ) from exc
            if not Path(self.model_path).is_dir():
                raise FileNotFoundError(
                    f"reranker model folder not found: {self.model_path!r} "
                    "(RAGLINE_RERANKER_MODEL must be a local directory; models are never "
                    "downloaded at run time)"
                )
            self._model = CrossEncoder(
                self.model_path, local_files_only=True, max_length=self.max_length
            )
            return self._model

    def scores(self, query: str, chunks: list[Chunk]) -> list[float]:
        """Cross-encoder relevance of each chunk to ``query``, in input order."""
        if not chunks:
            return []
        model = self._load()
        pairs = [(query, passage_text(c)) for c in chunks]
        raw = np.asarray(
            model.predict(
                pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True
            ),
            dtype=np.float64,
        )
        if raw.shape != (len(chunks),):
            raise ValueError(
                f"reranker model {self.model_path!r} returned scores of shape {raw.shape} for "
                f"{len(chunks)} pairs; a reranking cross-encoder has exactly one label"
            )
        return [float(s) for s in raw]

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        _check_top_k(top_k)
        return _reordered(hits, self.scores(query, [h.chunk for h in hits]), top_k)


class ReaderReranker:
    """ragline's own reader (:mod:`ragline.reader`) as the cross-encoder: ships in the
    package, so a reranker works out of the box. Scores are the reader's answerability
    logits over ``Title > Section`` + chunk text (its best window for a long chunk)."""

    def __init__(self, threads: int = 0) -> None:
        from ragline.reader import shared_reader

        self.reader = shared_reader(threads)

    def scores(self, query: str, chunks: list[Chunk]) -> list[float]:
        return [r.logit for r in self.reader.read(query, [passage_text(c) for c in chunks])]

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        _check_top_k(top_k)
        return _reordered(hits, self.scores(query, [h.chunk for h in hits]), top_k)


def make_reranker(settings: Settings) -> Reranker:
    """The reranker the settings ask for (heuristic unless a cross-encoder or the
    reader is named)."""
    if settings.reranker == "cross-encoder":
        return CrossEncoderReranker(settings.reranker_model)
    if settings.reranker == "reader":
        return ReaderReranker(settings.reader_threads)
    return HeuristicReranker()
