"""The chunks searches return most, kept in memory per tenant, so that while the
store cannot be reached an answer can still come from them (seed 002's "cached
popular chunks"), marked low confidence. Ranking over the cache is plain word
overlap: no index, no model call that could fail with the store."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ragline.store.filter_ast import evaluate, parse
from ragline.store.filters import CHUNK_FILTER_FIELDS
from ragline.types import Chunk, Hit

_WORD = re.compile(r"\w+")


def words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text) if len(w) > 2}


def overlap_rank(query: str, chunks: list[Chunk], k: int) -> list[Hit]:
    """The chunks sharing words with ``query``, most shared first (pure)."""
    q = words(query)
    scored = []
    for chunk in chunks:
        shared = len(q & words(f"{chunk.title} {chunk.section} {chunk.text}"))
        if shared:
            scored.append((shared / max(1, len(q)), chunk))
    scored.sort(key=lambda p: (-p[0], p[1].id))
    return [Hit(chunk=c, score=s, rank=i + 1) for i, (s, c) in enumerate(scored[:k])]


def matches(chunk: Chunk, filters: Mapping[str, Any]) -> bool:
    """Whether ``chunk`` passes ``filters`` (validated by the request already), as the
    store would decide."""
    row = {name: getattr(chunk, name, None) for name in CHUNK_FILTER_FIELDS}
    return evaluate(parse(filters), row, chunk.metadata)


class PopularChunks:
    """Up to ``capacity`` chunks per tenant, the most often retrieved ones."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._counts: dict[str, Counter[str]] = {}
        self._chunks: dict[str, dict[str, Chunk]] = {}
        self._lock = threading.Lock()

    def record(self, hits: list[Hit]) -> None:
        if not self.capacity:
            return
        with self._lock:
            for hit in hits:
                c = hit.chunk
                if not c.text:  # a placeholder without its text: nothing to answer from
                    continue
                counts = self._counts.setdefault(c.tenant, Counter())
                counts[c.id] += 1
                self._chunks.setdefault(c.tenant, {})[c.id] = c
            for tenant, counts in self._counts.items():
                if len(counts) > 2 * self.capacity:  # trim now and then, not every call
                    keep = dict(counts.most_common(self.capacity))
                    self._counts[tenant] = Counter(keep)
                    chunks = self._chunks[tenant]
                    self._chunks[tenant] = {i: chunks[i] for i in keep}

    def search(self, query: str, k: int, filters: Mapping[str, Any]) -> list[Hit]:
        tenant = str(filters.get("tenant", ""))
        with self._lock:
            counts = self._counts.get(tenant, Counter())
            chunks = self._chunks.get(tenant, {})
            pool = [chunks[i] for i, _ in counts.most_common(self.capacity)]
        return overlap_rank(query, [c for c in pool if matches(c, filters)], k)

    def size(self, tenant: str) -> int:
        with self._lock:
            return min(len(self._counts.get(tenant, ())), self.capacity)
