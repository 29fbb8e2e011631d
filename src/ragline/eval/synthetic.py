"""Synthetic chunks for scale tests: real text, real vectors, as many rows as asked.

Embedding a million passages on 2 cores takes a day, so scale benchmarks build
their indexes from a small *pool* of real text windows, of which the first
``len(real)`` carry their real embedding (the caller computes those, or takes
them from an ingested index). Row ``i`` of the synthetic corpus is:

* ``i < len(pool)``: pool window ``i`` itself; its vector is its real embedding
  when it has one, else the real vector of a random embedded window plus noise;
* ``i ≥ len(pool)``: a *splice*: the first half of the words of a random pool
  window followed by the second half of another's (title and chapter of the
  first), so nearly every row has distinct text and BM25 sees a realistic
  vocabulary; its vector is the real vector of a random embedded window plus
  Gaussian noise (σ per component), re-normalised.

Rows are generated lazily in blocks from ``(seed, 0, block)``, so a run never holds
a million texts at once and any prefix of the rows is the same at every scale
(the 10k index is the first 10k rows of the 1M one). Only embedded rows pair a
text with its own vector, so vector and keyword candidates overlap less than on
a real corpus: a pessimistic case for fusion.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragline.embed.base import Embedder, EmbedderWrapper, ModelFingerprint, Vectors
from ragline.ingest.records import content_hash, doc_id_for
from ragline.store.base import DocumentWrite, IndexStore
from ragline.types import Chunk, DocumentRecord

#: Chunks per synthetic document (``replace_documents`` writes whole documents).
DOC_CHUNKS = 20
#: Rows generated together from one ``(seed, block)`` random stream.
BLOCK_ROWS = 1000
CREATED = "2024-01-01T00:00:00+00:00"

_FENCE = re.compile(r"^(```|~~~).*?^(```|~~~)\s*$", re.MULTILINE | re.DOTALL)
_HEADING = re.compile(r"^#+\s+(.*)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Window:
    """A run of real text with the title and chapter it is filed under."""

    title: str
    chapter: str
    text: str


def word_windows(words: Sequence[str], size: int, stride: int) -> list[str]:
    """Overlapping runs of ``size`` words every ``stride`` words (the tail included)."""
    if size < 1 or stride < 1:
        raise ValueError(f"window size and stride must be positive, got {size} and {stride}")
    if len(words) <= size:
        return [" ".join(words)] if words else []
    starts = list(range(0, len(words) - size + 1, stride))
    if starts[-1] + size < len(words):
        starts.append(len(words) - size)
    return [" ".join(words[s : s + size]) for s in starts]


def beir_windows(corpus: Path, size: int, stride: int) -> list[Window]:
    """Word windows over every abstract of a BEIR ``corpus.jsonl`` (chapter = folder name)."""
    out: list[Window] = []
    chapter = corpus.parent.name
    with corpus.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
                title, text = str(doc.get("title", "")), str(doc["text"])
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{corpus}:{n}: not a BEIR corpus line ({e})") from None
            out += [Window(title, chapter, w) for w in word_windows(text.split(), size, stride)]
    return out


def markdown_windows(root: Path, size: int, stride: int) -> list[Window]:
    """Word windows over the prose of every Markdown file under ``root``: code fences,
    headings and one-line directive labels (``:label:``) dropped."""
    out: list[Window] = []
    for path in sorted(root.rglob("*.md")):
        raw = path.read_text(encoding="utf-8")
        head = _HEADING.search(raw)
        title = head.group(1).strip() if head else path.stem
        prose = _FENCE.sub("\n\n", raw)
        paras = [p for p in re.split(r"\n\s*\n", prose) if not p.lstrip().startswith(("#", ":"))]
        words = " ".join(paras).split()
        chapter = path.parent.name if path.parent != root else root.name
        out += [Window(title, chapter, w) for w in word_windows(words, size, stride)]
    return out


def distinct_shuffled(pool: Sequence[Window], seed: int) -> list[Window]:
    """Each window once, in a seeded random order (so a head of it is a fair sample)."""
    out = list(dict.fromkeys(pool))
    random.Random(seed).shuffle(out)
    return out


def splice(first: str, second: str) -> str:
    """The first half of ``first``'s words, then the second half of ``second``'s."""
    a, b = first.split(), second.split()
    return " ".join(a[: max(1, len(a) // 2)] + b[len(b) // 2 :])


def doc_source(doc: int) -> str:
    return f"/synthetic/doc-{doc:07d}.md"


def row_id(row: int, tenant: str) -> str:
    """Chunk id of a row: its document's id and its place in the document."""
    doc, index = divmod(row, DOC_CHUNKS)
    return f"{doc_id_for(tenant, doc_source(doc))}-{index:03d}"


def make_chunk(w: Window, row: int, tenant: str) -> Chunk:
    """Row ``row`` as chunk ``row % DOC_CHUNKS`` of document ``row // DOC_CHUNKS``."""
    doc, index = divmod(row, DOC_CHUNKS)
    source = doc_source(doc)
    words = len(w.text.split())
    c = Chunk(
        id=row_id(row, tenant),
        doc_id=doc_id_for(tenant, source),
        tenant=tenant,
        source=source,
        title=w.title,
        chapter=w.chapter,
        section=w.title,
        heading_path=(w.title,),
        url=f"file://{source}",
        anchor="",
        chunk_index=index,
        start_char=0,
        end_char=len(w.text),
        token_count=words * 4 // 3,
        word_count=words,
        has_code=False,
        has_equations="$" in w.text,
        content_hash="",
        created_at=CREATED,
        text=w.text,
    )
    c.content_hash = content_hash(c.embed_text)
    return c


def embed_texts(windows: Sequence[Window], tenant: str = "default") -> list[str]:
    """What ingestion would embed for these windows (``Chunk.embed_text``)."""
    return [make_chunk(w, 0, tenant).embed_text for w in windows]


class Synthetic:
    """The synthetic rows over ``pool`` (see the module docstring), made on demand.

    ``real`` holds the embeddings of ``pool[:len(real)]`` (unit length).
    """

    def __init__(self, pool: Sequence[Window], real: Vectors, sigma: float, seed: int) -> None:
        if not pool:
            raise ValueError("the synthetic corpus needs at least one text window")
        if real.ndim != 2 or not 1 <= real.shape[0] <= len(pool):
            raise ValueError(
                f"need real vectors for 1 to {len(pool)} pool windows, got shape {real.shape}"
            )
        if sigma < 0:
            raise ValueError(f"sigma must be ≥ 0, got {sigma}")
        self.pool = list(pool)
        self.real = np.asarray(real, dtype=np.float32)
        self.sigma = sigma
        self.seed = seed
        self.dimension = int(self.real.shape[1])
        self._cache: tuple[int, list[Window], Vectors] | None = None
        sample = self._noisy(np.random.default_rng([seed, 1]), BLOCK_ROWS)
        self.noisy_cosine = float(np.mean(np.sum(sample[0] * self.real[sample[1]], axis=1)))

    @property
    def embedded(self) -> int:
        """Rows that carry the real embedding of their own text."""
        return int(self.real.shape[0])

    def _noisy(self, rng: np.random.Generator, n: int) -> tuple[Vectors, np.ndarray]:
        src = rng.integers(0, self.embedded, size=n)
        noise = rng.normal(0.0, self.sigma, size=(n, self.dimension)).astype(np.float32)
        vecs = self.real[src] + noise
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs, src

    def _block(self, block: int) -> tuple[list[Window], Vectors]:
        if self._cache is not None and self._cache[0] == block:
            return self._cache[1], self._cache[2]
        rng = np.random.default_rng([self.seed, 0, block])
        start = block * BLOCK_ROWS
        n_pool = len(self.pool)
        first = rng.integers(0, n_pool, size=BLOCK_ROWS)
        second = rng.integers(0, n_pool, size=BLOCK_ROWS)
        vectors, _src = self._noisy(rng, BLOCK_ROWS)
        windows: list[Window] = []
        for j in range(BLOCK_ROWS):
            row = start + j
            if row < self.embedded:
                vectors[j] = self.real[row]
            if row < n_pool:
                windows.append(self.pool[row])
            else:
                a, b = self.pool[first[j]], self.pool[second[j]]
                windows.append(Window(a.title, a.chapter, splice(a.text, b.text)))
        self._cache = (block, windows, vectors)
        return windows, vectors

    def rows(self, start: int, stop: int) -> tuple[list[Window], Vectors]:
        """Windows and vectors of rows ``start`` to ``stop`` (exclusive)."""
        if not 0 <= start <= stop:
            raise ValueError(f"bad row range {start}..{stop}")
        windows: list[Window] = []
        parts: list[Vectors] = []
        row = start
        while row < stop:
            block, offset = divmod(row, BLOCK_ROWS)
            take = min(stop - row, BLOCK_ROWS - offset)
            w, v = self._block(block)
            windows += w[offset : offset + take]
            parts.append(v[offset : offset + take])
            row += take
        vectors = np.concatenate(parts) if parts else np.empty((0, self.dimension), np.float32)
        return windows, vectors

    def vectors(self, start: int, stop: int) -> Vectors:
        return self.rows(start, stop)[1]

    def spliced(self, rows: int) -> int:
        """How many of the first ``rows`` rows are splices."""
        return max(0, rows - len(self.pool))


def document_writes(
    data: Synthetic, rows: int, batch_chunks: int, tenant: str
) -> Iterator[list[DocumentWrite]]:
    """The first ``rows`` rows as documents of :data:`DOC_CHUNKS` chunks, grouped into
    batches of about ``batch_chunks`` chunks (one ``replace_documents`` call each)."""
    if batch_chunks < 1:
        raise ValueError(f"batch_chunks must be positive, got {batch_chunks}")
    batch: list[DocumentWrite] = []
    pending = 0
    for doc, start in enumerate(range(0, rows, DOC_CHUNKS)):
        stop = min(rows, start + DOC_CHUNKS)
        windows, vectors = data.rows(start, stop)
        chunks = [make_chunk(w, start + i, tenant) for i, w in enumerate(windows)]
        record = DocumentRecord(
            doc_id=chunks[0].doc_id,
            tenant=tenant,
            source=chunks[0].source,
            file_hash=content_hash(f"synthetic-{doc}"),
            chunk_count=len(chunks),
            token_count=sum(c.token_count for c in chunks),
            chapter=chunks[0].chapter,
            title=chunks[0].title,
            format="markdown",
            ingested_at=CREATED,
        )
        batch.append(DocumentWrite(record, chunks, vectors))
        pending += len(chunks)
        if pending >= batch_chunks:
            yield batch
            batch, pending = [], 0
    if batch:
        yield batch


@dataclass(frozen=True, slots=True)
class BuildStats:
    rows: int
    writes: int  # replace_documents calls
    write_seconds: float
    optimize_seconds: float


def build_index(
    store: IndexStore,
    data: Synthetic,
    rows: int,
    batch_chunks: int,
    fingerprint: ModelFingerprint,
    tenant: str = "default",
) -> BuildStats:
    """Write the first ``rows`` rows through ``replace_documents`` in batches, then
    ``optimize()`` once, as an ingest of that many chunks would."""
    store.fingerprint(fingerprint)
    t0 = time.perf_counter()
    writes = 0
    for batch in document_writes(data, rows, batch_chunks, tenant):
        store.replace_documents(batch)
        writes += 1
    t1 = time.perf_counter()
    store.optimize()
    t2 = time.perf_counter()
    return BuildStats(rows, writes, t1 - t0, t2 - t1)


class PrecomputedEmbedder(EmbedderWrapper):
    """An embedder that returns query vectors computed beforehand (by ``inner``), so
    a timed search measures store and fusion work only."""

    def __init__(self, inner: Embedder, queries: Sequence[str]) -> None:
        super().__init__(inner)
        self._vectors = {q: inner.embed_query(q) for q in dict.fromkeys(queries)}

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> Vectors:
        try:
            return self._vectors[text]
        except KeyError:
            raise KeyError(f"no precomputed vector for query {text[:60]!r}") from None


def pseudo_queries(pool: Sequence[Window], n: int, seed: int) -> list[str]:
    """``n`` distinct queries cut from the pool: a run of 4–12 words of a random
    window (what a user who half remembers a passage types)."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    tries = 0
    while len(out) < n and tries < 20 * n + 100:
        tries += 1
        words = pool[rng.randrange(len(pool))].text.split()
        if not words:
            continue
        size = min(len(words), rng.randint(4, 12))
        at = rng.randrange(len(words) - size + 1)
        q = " ".join(words[at : at + size])
        if any(ch.isalnum() for ch in q):
            out[q] = None
    if len(out) < n:
        raise ValueError(f"the text pool yields only {len(out)} distinct queries, {n} asked")
    return list(out)
