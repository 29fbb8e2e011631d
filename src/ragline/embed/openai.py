"""Any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp…).

Passages go out in batches, and each batch is retried on its own: a 429 or a
dropped connection on batch 40 re-sends batch 40, never the 39 already embedded.
That is what stops one rate limit from restarting a whole ingestion. The retry
rules (statuses, backoff, ``Retry-After``) are :mod:`ragline.retry`'s, shared with
the generator; a ``Retry-After`` above 60 s is cut to 60 s rather than failing.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import numpy as np

from ragline.embed.base import (
    EmbeddingError,
    ModelFingerprint,
    Vectors,
    l2_normalise,
    text_list,
)
from ragline.embed.tokenizer import TokenCounter
from ragline.retry import RetryPolicy, error_message, is_retryable, parse_retry_after

_PROBE_TEXT = "dimension probe"


def parse_embeddings(body: Any, expected: int) -> list[list[float]]:
    """The vectors of an embeddings response, ordered by their ``index`` field."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != expected:
        got = len(data) if isinstance(data, list) else "no 'data' list"
        raise EmbeddingError(f"embeddings response: expected {expected} items in 'data', got {got}")
    rows: list[list[float] | None] = [None] * expected
    for pos, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
            raise EmbeddingError(f"embeddings response: data[{pos}] has no 'embedding' list")
        index = item.get("index", pos)
        if not isinstance(index, int) or not 0 <= index < expected or rows[index] is not None:
            raise EmbeddingError(f"embeddings response: data[{pos}] has a bad index {index!r}")
        rows[index] = item["embedding"]
    return [r for r in rows if r is not None]


class OpenAIEmbedder:
    """Embeds through an OpenAI-compatible HTTP API (``base_url`` ends in ``/v1``).

    ``count_tokens`` uses the MiniLM tokenizer: an approximation of the remote
    model's count, good enough for chunk budgets (remote models read far more
    tokens than a chunk holds). ``sleep`` and ``rng`` are injectable so the
    retry schedule can be tested without waiting. With ``dimension=0`` the first
    read of ``dimension`` or ``fingerprint`` sends a one-text probe request (on
    Python 3.11, ``isinstance(x, Embedder)`` reads them too).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        batch_size: int = 64,
        timeout_s: float = 30.0,
        max_retries: int = 6,
        dimension: int = 0,
        max_tokens: int = 256,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL like http://host:8000/v1, got {base_url!r}"
            )
        if not model:
            raise ValueError("model must name the remote embedding model (RAGLINE_EMBED_MODEL)")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if dimension < 0:
            raise ValueError(f"dimension must be >= 0 (0 = probe it), got {dimension}")
        if max_tokens < 3:
            raise ValueError(f"max_tokens must be >= 3, got {max_tokens}")
        self._max_tokens = max_tokens
        self._base_url = base_url.rstrip("/")
        self._url = f"{self._base_url}/embeddings"
        self._model = model
        self._batch_size = batch_size
        # A long Retry-After is waited out (capped): an ingestion should not lose a batch.
        self._policy = RetryPolicy(max_retries=max_retries, long_retry_after="cap")
        self._timeout_s = timeout_s
        self._dimension = dimension
        self._sleep = sleep
        self._rng = rng
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), headers=headers)
        self._counter = TokenCounter()
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- model -------------------------------------------------------------------------

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def max_retries(self) -> int:
        return self._policy.max_retries

    @property
    def name(self) -> str:
        return f"openai:{self._model}@{self._base_url}"

    @property
    def dimension(self) -> int:
        """The configured dimension, or the one a first (probe) request returns."""
        if not self._dimension:
            self._embed_batch([_PROBE_TEXT])
        return self._dimension

    @property
    def window_tokens(self) -> int:
        """``max_tokens`` (RAGLINE_EMBED_MAX_TOKENS: the remote model's window is not
        known here) less two special tokens, counted with the MiniLM tokenizer."""
        return self._max_tokens - 2

    @property
    def fingerprint(self) -> ModelFingerprint:
        dim = self.dimension
        digest = hashlib.sha256(f"{self.name}{dim}".encode()).hexdigest()
        return ModelFingerprint(self.name, dim, digest)

    # --- embedding ---------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        items = text_list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [
            self._embed_batch(items[i : i + self._batch_size])
            for i in range(0, len(items), self._batch_size)
        ]
        return np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> Vectors:
        return np.asarray(self.embed_documents([text])[0], dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return self._counter(text)

    def _embed_batch(self, batch: list[str]) -> Vectors:
        body = self._post({"model": self._model, "input": batch})
        rows = parse_embeddings(body, len(batch))
        dims = {len(r) for r in rows}
        if len(dims) != 1:
            raise EmbeddingError(
                f"{self._url}: vectors of mixed lengths {sorted(dims)} in one response"
            )
        dim = dims.pop()
        with self._lock:
            if not self._dimension:
                self._dimension = dim
        if dim != self._dimension:
            raise EmbeddingError(
                f"{self._url}: model {self._model!r} returned {dim}-dimensional vectors, "
                f"expected {self._dimension} (RAGLINE_EMBED_DIMENSION or the first response)"
            )
        try:
            arr = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError(f"{self._url}: non-numeric values in an embedding: {exc}") from exc
        return l2_normalise(arr)

    def _post(self, payload: dict[str, Any]) -> Any:
        """POST one batch, retrying retryable statuses and network errors with backoff."""
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                response = self._client.post(self._url, json=payload)
            except httpx.TransportError as exc:  # timeouts, refused and reset connections
                problem = f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status < 300:
                    try:
                        return response.json()
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        raise EmbeddingError(
                            f"{self._url}: HTTP {status} with a body that is not JSON: {exc}"
                        ) from exc
                message = error_message(response.content) or response.reason_phrase
                if not is_retryable(status):
                    raise EmbeddingError(f"{self._url}: HTTP {status} (not retried): {message}")
                problem = f"HTTP {status}: {message}"
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
            if attempt >= self._policy.max_retries:
                raise EmbeddingError(
                    f"{self._url}: gave up after {attempt + 1} attempts; last error: {problem}"
                )
            delay = self._policy.delay(attempt, self._rng(), retry_after)
            if delay is None:
                raise EmbeddingError(
                    f"{self._url}: {problem}; the server asks to retry after {retry_after:.0f} s"
                )
            self._sleep(delay)
            attempt += 1
