"""ragline's reader: a question–passage cross-encoder that ragline trains and ships.

The embedder reads a question and a passage apart and compares two vectors: that
measures topicality, not whether the passage answers. The reader reads them together
(MiniLM-L6, fine-tuned on SQuAD 2.0, QNLI and SciFact pairs by
``training/train_reader.py``; see ``assets/READER_CARD.md``) and gives, per passage
window, an answerability logit and SQuAD-style start/end logits, so one run per window
says both *whether* and *where* the passage answers.

Passages longer than a window overflow into further windows with a stride (as SQuAD
readers do); a passage's verdict is its best window's. Windows are batched by length
and run on onnxruntime with int8 weights; the file's SHA-256 is checked at load.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding

from ragline.embed.base import EmbeddingError, cached_file_sha256
from ragline.embed.onnx import copy_tokenizer, cpu_session
from ragline.embed.tokenizer import load_tokenizer
from ragline.reader.spans import Window, sigmoid

MODEL_FILE = "reader-int8.onnx"
#: SHA-256 of ``assets/reader-int8.onnx`` (also in ``assets/READER_CARD.md``; a test checks both).
MODEL_SHA256 = "e212c7aaa5764f4aa7aa2cee20622f2ebb6939a00bb597e4e2c7da1fe497bb0f"
#: The window the reader was trained on (question + passage, in tokens) and the overlap
#: between a long passage's windows.
MAX_LENGTH = 256
STRIDE = 64
#: A question or claim longer than this many tokens is cut: the passage needs the room.
MAX_QUESTION_TOKENS = 96
#: Padded tokens per model run: windows are run in batches of about this many tokens.
MAX_BATCH_TOKENS = 2048

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OUTPUTS = ("answer", "start", "end")


class ReaderError(EmbeddingError):
    """The reader model cannot be loaded or run (damaged file, wrong outputs)."""


@dataclass(frozen=True, slots=True, eq=False)
class Reading:
    """The reader's verdict on one (question, passage) pair: its windows' outputs."""

    windows: tuple[Window, ...]

    @property
    def logit(self) -> float:
        return max(w.logit for w in self.windows)

    @property
    def probability(self) -> float:
        """Probability that the passage answers (or, for a claim, supports) the question."""
        return sigmoid(self.logit)

    def best_span(self, lo: int = 0, hi: int | None = None) -> tuple[float, int, int] | None:
        """(score, start, end) of the best answer span in ``[lo, hi)`` of the passage,
        over every window whose answer logit is within reach of the best one's."""
        best: tuple[float, int, int] | None = None
        for w in self.windows:
            found = w.best_span(lo, hi)
            if found is not None and (best is None or found[0] > best[0]):
                best = found
        return best


def model_path() -> Path:
    return Path(str(resources.files("ragline.reader") / "assets" / MODEL_FILE))


class Reader:
    """Scores (question, passage) pairs; thread-safe, the session opened on first use."""

    def __init__(self, path: Path | None = None, *, threads: int = 0) -> None:
        self._path = path or model_path()
        self._packaged = path is None
        self._threads = threads
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        tok = copy_tokenizer(load_tokenizer())
        tok.no_padding()
        tok.enable_truncation(MAX_LENGTH, stride=STRIDE, strategy="only_second")
        self._pairs = tok
        self._plain = load_tokenizer()

    @property
    def name(self) -> str:
        return "ragline-reader-minilm-l6-int8"

    def _load(self) -> ort.InferenceSession:
        with self._lock:
            if self._session is None:
                self._session = self._open()
            return self._session

    def _open(self) -> ort.InferenceSession:
        digest = cached_file_sha256(self._path)
        if self._packaged and digest != MODEL_SHA256:
            raise ReaderError(
                f"{self._path}: sha256 {digest} does not match the reader's {MODEL_SHA256}; "
                "the model file is damaged or replaced: reinstall ragline"
            )
        threads = self._threads or min(2, os.cpu_count() or 1)
        session = cpu_session(self._path, threads=threads, fail=ReaderError, what="reader")
        names = {i.name for i in session.get_inputs()}
        outs = [o.name for o in session.get_outputs()]
        if set(_INPUTS) - names or list(_OUTPUTS) != outs:
            raise ReaderError(
                f"{self._path}: expected inputs {list(_INPUTS)} and outputs {list(_OUTPUTS)}, "
                f"found {sorted(names)} and {outs}"
            )
        return session

    def warm_up(self) -> None:
        """Open the session (hash check included) before the first question."""
        self._load()

    def read(self, question: str, passages: Sequence[str]) -> list[Reading]:
        """One :class:`Reading` per passage, for one question."""
        return self.read_pairs([(question, p) for p in passages])

    def probabilities(self, question: str, passages: Sequence[str]) -> list[float]:
        return [r.probability for r in self.read(question, passages)]

    def read_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[Reading]:
        """One :class:`Reading` per (question or claim, passage) pair."""
        if not pairs:
            return []
        session = self._load()
        encs = self._pairs.encode_batch([(self._cut(q), p or " ") for q, p in pairs])
        windows: list[tuple[int, Encoding]] = [
            (i, w) for i, e in enumerate(encs) for w in (e, *e.overflowing)
        ]
        order = sorted(range(len(windows)), key=lambda k: len(windows[k][1].ids))
        results: list[Window | None] = [None] * len(windows)
        start = 0
        while start < len(order):
            width = len(windows[order[start]][1].ids)
            end = start + 1
            while end < len(order) and (end - start + 1) * len(windows[order[end]][1].ids) <= max(
                MAX_BATCH_TOKENS, width
            ):
                end += 1
            batch = order[start:end]
            ran = self._run(session, [windows[k][1] for k in batch])
            for k, out in zip(batch, ran, strict=True):
                results[k] = out
            start = end
        grouped: list[list[Window]] = [[] for _ in pairs]
        for (i, _), got in zip(windows, results, strict=True):
            assert got is not None
            grouped[i].append(got)
        return [Reading(tuple(g)) for g in grouped]

    def _cut(self, question: str) -> str:
        """``question`` cut to :data:`MAX_QUESTION_TOKENS` tokens (at a token's end)."""
        enc = self._plain.encode(question, add_special_tokens=False)
        if len(enc.ids) <= MAX_QUESTION_TOKENS:
            return question or " "
        return question[: enc.offsets[MAX_QUESTION_TOKENS - 1][1]]

    @staticmethod
    def _run(session: ort.InferenceSession, encs: Sequence[Encoding]) -> list[Window]:
        n = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), n), dtype=np.int64)
        types = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encs):
            k = len(e.ids)
            ids[row, :k] = e.ids
            types[row, :k] = e.type_ids
            mask[row, :k] = 1
        try:
            answer, starts, ends = session.run(
                list(_OUTPUTS), {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            )
        except Exception as exc:
            raise ReaderError(
                f"the reader failed on a batch of {len(encs)} windows: {exc}"
            ) from exc
        out = []
        for row, e in enumerate(encs):
            seq = e.sequence_ids
            idx = [i for i, sid in enumerate(seq) if sid == 1]
            offsets = np.asarray([e.offsets[i] for i in idx], dtype=np.int64).reshape(-1, 2)
            out.append(
                Window(
                    logit=float(answer[row]),
                    starts=np.asarray(starts[row, idx], dtype=np.float32),
                    ends=np.asarray(ends[row, idx], dtype=np.float32),
                    offsets=offsets,
                    null=float(starts[row, 0] + ends[row, 0]),
                )
            )
        return out


_shared: dict[tuple[str, int], Reader] = {}
_shared_lock = threading.Lock()


def shared_reader(threads: int = 0, path: Path | None = None) -> Reader:
    """One reader per (model file, threads) in the process: the answerer, the reranker
    and the citation check share its session (and its memory, ~25 MB)."""
    key = (os.fspath(path or model_path()), threads)
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Reader(path, threads=threads)
        return _shared[key]
