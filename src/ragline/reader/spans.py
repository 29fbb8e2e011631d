"""Pure span arithmetic over one reader window: which answer span scores best, and how
well the best span inside a character range (a sentence) scores. No model here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Longest answer span in tokens (SQuAD answers: 99 % are under 30 tokens).
MAX_SPAN_TOKENS = 30

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class Window:
    """The reader's output for one window of a passage.

    ``starts``/``ends`` hold the start and end logits of the passage's tokens only, and
    ``offsets`` their character ranges in the passage (n × 2). ``null`` is the [CLS]
    start + end score: SQuAD 2.0's "no answer here" reference.
    """

    logit: float
    starts: F32
    ends: F32
    offsets: I64
    null: float

    def best_span(self, lo: int = 0, hi: int | None = None) -> tuple[float, int, int] | None:
        """(score, char start, char end) of the best span lying in ``[lo, hi)`` of the passage."""
        inside = self.offsets[:, 0] >= lo
        if hi is not None:
            inside &= self.offsets[:, 1] <= hi
        idx = np.flatnonzero(inside)
        if idx.size == 0:
            return None
        s, e = self.starts[idx], self.ends[idx]
        n = idx.size
        scores = s[:, None] + e[None, :]
        i, j = np.indices((n, n))
        scores = np.where((j < i) | (j - i >= MAX_SPAN_TOKENS), -np.inf, scores)
        k = int(np.argmax(scores))
        a, b = idx[k // n], idx[k % n]
        return float(scores.flat[k]), int(self.offsets[a, 0]), int(self.offsets[b, 1])


def sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-x)))
