"""Embedding throughput, measured the same way by every benchmark."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ragline.embed.base import Embedder


def measure_throughput(embedder: Embedder, texts: Sequence[str], repeats: int = 1) -> float:
    """Passages per second over ``repeats`` passes of ``texts``, after one warm-up batch.

    The warm-up (the first few texts) pays for lazy model loading and the
    runtime's first-call allocations, which are not steady-state speed.
    """
    if not texts:
        raise ValueError("measure_throughput needs at least one text")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    embedder.embed_documents(list(texts[: min(len(texts), 8)]))
    start = time.perf_counter()
    for _ in range(repeats):
        embedder.embed_documents(texts)
    elapsed = time.perf_counter() - start
    return len(texts) * repeats / elapsed
