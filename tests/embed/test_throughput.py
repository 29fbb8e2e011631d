"""measure_throughput: warm-up outside the clock, passages counted over every repeat."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.embed.throughput import measure_throughput


class CountingEmbedder:
    """Records the calls it gets; vectors are zeros (speed is not the point here)."""

    fingerprint = ModelFingerprint("counting", 2, "0" * 64)
    dimension = 2

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        return np.zeros((len(texts), 2), dtype=np.float32)

    def embed_query(self, text: str) -> Vectors:
        return np.zeros(2, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_warms_up_then_times_every_repeat() -> None:
    emb = CountingEmbedder()
    rate = measure_throughput(emb, ["x"] * 20, repeats=3)
    assert emb.calls == [8, 20, 20, 20]
    assert rate > 0


def test_real_model_gives_a_positive_rate(embedder: object) -> None:
    from ragline.embed.onnx import OnnxEmbedder

    assert isinstance(embedder, OnnxEmbedder)
    assert measure_throughput(embedder, ["a short passage about tensors"] * 4) > 0


def test_rejects_nothing_to_measure() -> None:
    with pytest.raises(ValueError, match="at least one text"):
        measure_throughput(CountingEmbedder(), [])
    with pytest.raises(ValueError, match="repeats"):
        measure_throughput(CountingEmbedder(), ["x"], repeats=0)
