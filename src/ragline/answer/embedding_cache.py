"""Sentence vectors shared by the extractive generator and the citation verifier.

Both embed the same context sentences for one question (the generator to pick
them, the verifier to check the citations it wrote), and the same chunks come
back for related questions. A bounded, thread-safe memo keyed by the sentence's
:func:`~ragline.answer.sentences.embed_key` embeds each text once, in one batch
per call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ragline.answer.sentences import embed_key
from ragline.embed.base import Embedder, Vectors


class EmbeddingCache:
    """``vectors(texts)`` → one L2-normalised row per text, embedding only the misses."""

    def __init__(self, embedder: Embedder, max_entries: int = 20_000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.embedder = embedder
        self.max_entries = max_entries
        self._memo: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()
        self.embedded = 0  # texts sent to the model so far (for tests and metrics)

    def vectors(self, texts: Sequence[str]) -> Vectors:
        keys = [embed_key(t) for t in texts]
        if not keys:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        with self._lock:
            missing = list(dict.fromkeys(k for k in keys if k not in self._memo))
        if missing:
            fresh = self.embedder.embed_documents(missing)
            with self._lock:
                self.embedded += len(missing)
                for k, v in zip(missing, fresh, strict=True):
                    self._memo[k] = np.asarray(v, dtype=np.float32)
        with self._lock:
            rows = []
            for k in keys:
                row = self._memo.get(k)
                if row is None:  # evicted by a concurrent call between the two locks
                    row = np.asarray(self.embedder.embed_documents([k])[0], dtype=np.float32)
                else:
                    self._memo.move_to_end(k)
                rows.append(row)
            while len(self._memo) > self.max_entries:
                self._memo.popitem(last=False)
        return np.stack(rows).astype(np.float32, copy=False)
