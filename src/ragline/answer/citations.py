"""Citations: find them in an answer, map them to context blocks, check them.

A generator may write ``[2]``, ``[2, 3]``, ``[Citation 2]`` or ``[Title >
Section]``. Each is mapped to a numbered context block; a number that was never
in the context (``[7]`` with 5 blocks) or a label that matches no block is
dropped. Each remaining citation is verified: the claim (the answer sentence
before the marker) is compared with every sentence of the cited block, by
embedding cosine and by word overlap, and the best sentence becomes the
supporting span. Below the calibrated threshold the citation is unsupported and
is flagged or removed (``unsupported_citations``).

The finished answer's text is rewritten so every kept citation reads ``[n]``.
:class:`CitationTracker` does the same incrementally on a token stream, so a
``citation`` event can go out as soon as its closing bracket arrives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragline.answer.context import Context, ContextBlock
from ragline.answer.evidence import (
    TermWeights,
    contradicted,
    coverage,
    question_constraints,
    unmet,
)
from ragline.answer.sentences import CODE, MATH, OTHER, Segment, embed_key, segments
from ragline.embed.base import Vectors
from ragline.types import Citation

#: Embeds texts into L2-normalised rows (an ``EmbeddingCache.vectors`` in production).
EmbedTexts = Callable[[Sequence[str]], Vectors]

_NUMBERED = re.compile(
    r"\[\s*(?:(?:citations?|sources?|refs?|references?|context)\s*#?\s*)?"
    r"(\d{1,3}(?:\s*(?:,|;|and|&|-|–)\s*\d{1,3})*)\s*\]",
    re.IGNORECASE,
)
_LABELLED = re.compile(r"\[([^\[\]\n]{3,200})\](?!\()")
_PROTECTED = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|`[^`\n]*`", re.DOTALL)
_CLOSERS = frozenset(" \t\n.,;:!?)")
_WORD = re.compile(r"[a-z0-9]+")
_BOUNDARY = re.compile(r"[.!?][\"'”’)]*\s+|[。！？]|\n\s*\n")  # 。 needs no space
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "than",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "we",
        "you",
        "they",
        "he",
        "she",
        "i",
        "our",
        "your",
        "their",
        "his",
        "her",
        "not",
        "no",
        "do",
        "does",
        "did",
        "can",
        "could",
        "may",
        "might",
        "will",
        "would",
        "should",
        "shall",
        "also",
        "such",
        "into",
        "over",
        "under",
        "about",
        "between",
        "so",
        "very",
        "more",
        "most",
        "each",
        "any",
        "all",
        "some",
        "one",
        "two",
        "has",
        "have",
        "had",
        "use",
        "used",
        "using",
    ]
)


# --- extraction -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Marker:
    """A citation-shaped bracket in an answer: numbers, or a label to map."""

    start: int
    end: int
    text: str
    numbers: tuple[int, ...] = ()
    label: str = ""


def _numbers(spec: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in re.split(r"\s*(?:,|;|and|&)\s*", spec):
        bounds = re.split(r"\s*[-–]\s*", part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit():
            lo, hi = int(bounds[0]), int(bounds[1])
            if lo <= hi and hi - lo <= 20:
                out.extend(range(lo, hi + 1))
                continue
        out.extend(int(b) for b in bounds if b.isdigit())
    return tuple(dict.fromkeys(out))


def extract_markers(text: str) -> list[Marker]:
    """Every ``[n]``-style and ``[label]``-style marker outside maths and code, in order."""
    blocked = [(m.start(), m.end()) for m in _PROTECTED.finditer(text)]

    def free(s: int, e: int) -> bool:
        return not any(bs < e and s < be for bs, be in blocked)

    out: list[Marker] = []
    taken: list[tuple[int, int]] = []
    for m in _NUMBERED.finditer(text):
        if free(m.start(), m.end()):
            out.append(Marker(m.start(), m.end(), m.group(0), numbers=_numbers(m.group(1))))
            taken.append((m.start(), m.end()))
    for m in _LABELLED.finditer(text):
        s, e = m.start(), m.end()
        if free(s, e) and not any(ts < e and s < te for ts, te in taken):
            out.append(Marker(s, e, m.group(0), label=m.group(1).strip()))
    return sorted(out, key=lambda mk: mk.start)


# --- mapping ----------------------------------------------------------------------


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("›", ">").split())


def _bigrams(s: str) -> list[str]:
    s = _norm(s)
    return [s[i : i + 2] for i in range(len(s) - 1)]


def dice(a: str, b: str) -> float:
    """Sørensen–Dice coefficient of character bigrams (multiset), 0…1."""
    x, y = _bigrams(a), _bigrams(b)
    if not x or not y:
        return 0.0
    pool: dict[str, int] = {}
    for g in y:
        pool[g] = pool.get(g, 0) + 1
    common = 0
    for g in x:
        if pool.get(g, 0) > 0:
            pool[g] -= 1
            common += 1
    return 2.0 * common / (len(x) + len(y))


#: Label-to-block similarity a ``[Title > Section]`` citation must exceed.
DICE_THRESHOLD = 0.5


def map_label(label: str, blocks: Sequence[ContextBlock]) -> list[int]:
    """Block numbers a ``[Title > Section]`` label names, best evidence first.

    Exact (label, title or section) beats containment, which beats Dice > 0.5
    (the best-scoring blocks). Several blocks may share a label; the verifier
    then picks the one that supports the sentence best.
    """
    want = _norm(label)
    if not want:
        return []

    def names(b: ContextBlock) -> list[str]:
        c = b.hit.chunk
        return [n for n in (_norm(b.label), _norm(c.title), _norm(c.section)) if n]

    exact = [b.number for b in blocks if want in names(b)]
    if exact:
        return exact
    contains = [
        b.number
        for b in blocks
        if len(want) >= 4 and (want in _norm(b.label) or _norm(b.label) in want)
    ]
    if contains:
        return contains
    scored = [(max(dice(want, n) for n in names(b)), b.number) for b in blocks if names(b)]
    best = max((s for s, _ in scored), default=0.0)
    if best <= DICE_THRESHOLD:
        return []
    return [n for s, n in scored if s == best]


def candidate_blocks(marker: Marker, context: Context) -> list[list[int]]:
    """For each cited item of ``marker``, the block numbers it may mean (empty = drop)."""
    if marker.numbers:
        return [[n] if context.block(n) is not None else [] for n in marker.numbers]
    return [map_label(marker.label, context.blocks)]


#: What may follow a bracket placed as a citation: the sentence's end, a line's end,
#: the text's end or another bracket (``[A][B]``).
_CITATION_END = re.compile(r"\s*(?:$|[.!?;:,)]|\n|\[)")


def is_citation_like(marker: Marker, text: str = "") -> bool:
    """Numbers and ``A > B`` labels are meant as citations even when they map nowhere,
    and so is any label placed as one (after a space or a sentence's end, before the
    sentence's end: ``... tables whole [Chunking Guide].``), which an invented source
    is. Bracketed text inside a sentence (``their [sic] work``) is ordinary text."""
    if marker.numbers or ">" in marker.label or "›" in marker.label:
        return True
    if not text:
        return False
    before = text[marker.start - 1 : marker.start]
    placed_after = not before or before.isspace() or before in ".!?;:,)]"
    return placed_after and _CITATION_END.match(text, marker.end) is not None


# --- claims -----------------------------------------------------------------------


def claim_before(text: str, position: int, markers: Sequence[Marker]) -> str:
    """The answer sentence a marker at ``position`` backs: from the previous sentence
    end up to the marker, other markers removed. A marker right after a full stop
    ("… a loss. [1]") backs the sentence it follows."""
    spans = [(m.start, m.end) for m in markers if m.end <= position]
    head = text[:position]
    while True:  # drop the run of markers (and spaces) immediately before this one
        stripped = head.rstrip()
        for s, e in reversed(spans):
            if e == len(stripped):
                head = stripped[:s]
                break
        else:
            head = stripped
            break
    end = len(head)
    search = head.rstrip(".!?\"'”’) ")
    start = 0
    for m in _BOUNDARY.finditer(search):
        start = m.end()
    claim_text = head[start:end]
    for s, e in sorted(spans, reverse=True):
        if start <= s and e <= end:
            claim_text = claim_text[: s - start] + claim_text[e - start :]
    return " ".join(claim_text.split())


# --- verification -----------------------------------------------------------------


def content_words(text: str) -> set[str]:
    """Lower-cased words without stop words, plural ``s`` dropped: the lexical evidence."""
    words = set()
    for w in _WORD.findall(text.lower()):
        if w in _STOPWORDS or len(w) < 2:
            continue
        words.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return words


def lexical_overlap(claim: str, sentence: str) -> float:
    """Share of the claim's content words that the sentence contains (0…1)."""
    c = content_words(claim)
    if not c:
        return 0.0
    return len(c & content_words(sentence)) / len(c)


def support_score(cosine: float, overlap: float, lexical_weight: float) -> float:
    """The calibrated combination: ``w·overlap + (1 − w)·max(cosine, 0)``."""
    return lexical_weight * overlap + (1.0 - lexical_weight) * max(cosine, 0.0)


def key_content_gap(
    claim: str, span: str, passage: str, weights: TermWeights, minimum: float
) -> str:
    """What of the claim's key content the cited span does not carry ("" when it
    carries it): a year, quoted phrase or name absent from the span and its passage,
    a number or year the span contradicts, or too small a share of the claim's key
    terms (weighted by rarity in the passage) in the span itself and the passage's
    first line (its label: title > section)."""
    c = question_constraints(claim)
    missing = unmet(c, span, passage)
    if missing:
        return "not in the source: " + ", ".join(missing[:3])
    against = contradicted(claim, span)
    if against:
        return "the source states other figures than " + ", ".join(against[:3])
    label = passage.split("\n", 1)[0]  # the title (and section) name the whole passage
    share = coverage(c.terms, f"{span}\n{label}", weights)
    if share < minimum:
        return f"the source holds {share:.0%} of the sentence's key terms"
    return ""


@dataclass(frozen=True, slots=True)
class Support:
    """The best-supporting sentence of a block for a claim."""

    block: ContextBlock
    score: float
    start: int  # span in block.text
    end: int
    supported: bool
    gap: str = ""  # why the span does not carry the claim's key content


def evidence_segments(text: str) -> list[Segment]:
    """Sentences (and tables, code, maths) a claim can be checked against; headings
    and directives are not evidence. The whole text when nothing else is found."""
    segs = [s for s in segments(text) if s.kind not in (OTHER,) and s.end > s.start]
    prose = [s for s in segs if s.kind not in (CODE, MATH)]
    chosen = prose or segs
    return chosen or [Segment(0, len(text), OTHER)]


class SupportVerifier:
    """Decides whether a cited block supports a claim, and where."""

    def __init__(
        self,
        embed: EmbedTexts,
        threshold: float,
        lexical_weight: float,
        key_coverage: float = 0.0,
        reader: Callable[[str, str], float | None] | None = None,
        reader_bar: float = 0.5,
    ) -> None:
        self.embed = embed
        self.threshold = threshold
        self.lexical_weight = lexical_weight
        self.key_coverage = key_coverage
        #: (claim, passage) → the reader's calibrated support probability, or None when
        #: it does not judge that claim (not English): then the support score decides.
        self.reader = reader
        self.reader_bar = reader_bar

    def check(self, claim: str, block: ContextBlock) -> Support:
        segs = evidence_segments(block.text)
        texts = [block.text[s.start : s.end] for s in segs]
        if not embed_key(claim):
            s = segs[0]
            return Support(block, 0.0, s.start, s.end, False)
        vecs = self.embed([claim, *texts])
        cos = np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)
        scores = [
            support_score(float(c), lexical_overlap(claim, t), self.lexical_weight)
            for c, t in zip(cos, texts, strict=True)
        ]
        i = int(np.argmax(scores))
        best = segs[i]
        gap = key_content_gap(
            claim,
            texts[i],
            f"{block.label}\n{block.text}",
            TermWeights.of(texts),
            self.key_coverage,
        )
        ok = scores[i] >= self.threshold and not gap
        p = self.reader(claim, f"{block.label}\n{block.text}") if self.reader else None
        if p is not None:  # the reader read claim and passage together: its verdict counts
            return Support(block, p, best.start, best.end, p >= self.reader_bar and not gap, gap)
        return Support(block, scores[i], best.start, best.end, ok, gap)

    def best(self, claim: str, blocks: Sequence[ContextBlock]) -> Support:
        """The best support among ``blocks`` (a label shared by several blocks)."""
        results = [self.check(claim, b) for b in blocks]
        return max(results, key=lambda r: r.score)


def make_citation(marker: Marker, claim: str, support: Support, start: int, end: int) -> Citation:
    block = support.block
    chunk, s, e = block.locate(support.start, support.end)
    return Citation(
        number=block.number,
        marker=marker.text,
        start=start,
        end=end,
        chunk_id=chunk.id,
        title=chunk.title,
        section=chunk.section,
        source=chunk.source,
        url=chunk.url,
        anchor=chunk.anchor,
        claim=claim,
        support_start=s,
        support_end=e,
        support_text=chunk.text[s:e],
        support_score=support.score,
        supported=support.supported,
    )


# --- resolution -------------------------------------------------------------------


@dataclass(slots=True)
class ResolvedCitations:
    """An answer's text rewritten with canonical ``[n]`` markers, and its citations."""

    text: str
    citations: list[Citation] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # markers naming nothing in the context


@dataclass(frozen=True, slots=True)
class _Resolved:
    marker: Marker
    claim: str
    kept: tuple[Support, ...]
    dropped: bool  # some cited item named no context block


def _resolve_marker(
    marker: Marker,
    text: str,
    markers: Sequence[Marker],
    context: Context,
    verifier: SupportVerifier,
    remove_unsupported: bool,
) -> _Resolved | None:
    """None when the bracket is ordinary text, not a citation."""
    candidates = candidate_blocks(marker, context)
    if not marker.numbers and not candidates[0] and not is_citation_like(marker, text):
        return None
    claim = claim_before(text, marker.start, markers)
    kept: list[Support] = []
    dropped = False
    for numbers in candidates:
        blocks = [b for n in numbers if (b := context.block(n)) is not None]
        if not blocks:
            dropped = True
            continue
        support = verifier.best(claim, blocks)
        keep = support.supported or not remove_unsupported
        if keep and all(k.block.number != support.block.number for k in kept):
            kept.append(support)
    return _Resolved(marker, claim, tuple(kept), dropped)


def resolve_citations(
    text: str,
    context: Context,
    verifier: SupportVerifier,
    *,
    remove_unsupported: bool = False,
) -> ResolvedCitations:
    """Map, verify and rewrite every citation of a finished answer.

    Kept citations become ``[n]`` (one bracket per block); a marker left with
    nothing to cite is removed with the space before it. Every returned citation
    names a block of ``context`` (and through it a chunk that was in the context).
    """
    markers = extract_markers(text)
    out: list[str] = []
    citations: list[Citation] = []
    dropped: list[str] = []
    pos = 0
    for marker in markers:
        r = _resolve_marker(marker, text, markers, context, verifier, remove_unsupported)
        if r is None:
            continue
        if r.dropped:
            dropped.append(marker.text)
        segment = text[pos : marker.start]
        if not r.kept:  # remove the marker and the space before it
            segment = segment.rstrip(" \t")
            after = text[marker.end : marker.end + 1]
            if segment and not segment[-1].isspace() and after and after not in _CLOSERS:
                segment += " "
            out.append(segment)
            pos = marker.end
            continue
        out.append(segment)
        offset = sum(len(p) for p in out)
        for support in r.kept:
            mark = f"[{support.block.number}]"
            citations.append(make_citation(r.marker, r.claim, support, offset, offset + len(mark)))
            out.append(mark)
            offset += len(mark)
        pos = marker.end
    out.append(text[pos:])
    return ResolvedCitations(text="".join(out), citations=citations, dropped=dropped)


class CitationTracker:
    """Citations of a streamed answer, reported as soon as each marker closes.

    ``feed(delta)`` returns the citations completed by that delta (already mapped
    and verified; removed ones are not reported); ``finish()`` resolves the whole
    text once more for the final answer, so stream and result always agree on
    which citations survive.
    """

    def __init__(
        self, context: Context, verifier: SupportVerifier, *, remove_unsupported: bool = False
    ) -> None:
        self.context = context
        self.verifier = verifier
        self.remove_unsupported = remove_unsupported
        self.text = ""
        self._seen: set[tuple[int, int]] = set()

    def feed(self, delta: str) -> list[Citation]:
        self.text += delta
        markers = extract_markers(self.text)
        fresh: list[Citation] = []
        for marker in markers:
            key = (marker.start, marker.end)
            if key in self._seen:
                continue
            self._seen.add(key)
            r = _resolve_marker(
                marker, self.text, markers, self.context, self.verifier, self.remove_unsupported
            )
            if r is None:
                continue
            for support in r.kept:
                fresh.append(make_citation(marker, r.claim, support, marker.start, marker.end))
        return fresh

    def finish(self) -> ResolvedCitations:
        return resolve_citations(
            self.text, self.context, self.verifier, remove_unsupported=self.remove_unsupported
        )
