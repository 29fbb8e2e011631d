"""The Embedder protocol: one interface for every way of turning text into vectors."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragline.errors import FaultError

Vectors = npt.NDArray[np.float32]  # shape (n, dimension), rows L2-normalised


class EmbeddingError(FaultError):
    """An embedder could not produce vectors (bad model file, remote endpoint refused)."""


@dataclass(frozen=True, slots=True)
class ModelFingerprint:
    """What an index records about the model that made its vectors.

    Opening an index with a model whose fingerprint differs is an error: vectors
    from two models are not comparable, and silently mixing them ruins search.
    """

    name: str
    dimension: int
    digest: str  # sha256 of the weights (or of name+dimension for remote models)

    def to_dict(self) -> dict[str, str | int]:
        return {"name": self.name, "dimension": self.dimension, "digest": self.digest}

    @classmethod
    def from_dict(cls, d: dict[str, str | int]) -> ModelFingerprint:
        return cls(name=str(d["name"]), dimension=int(d["dimension"]), digest=str(d["digest"]))


@runtime_checkable
class Embedder(Protocol):
    """Turns passages and queries into L2-normalised float32 vectors."""

    @property
    def fingerprint(self) -> ModelFingerprint: ...

    @property
    def dimension(self) -> int: ...

    @property
    def window_tokens(self) -> int:
        """Tokens of one text (as ``count_tokens`` counts them) the model reads; the
        rest is cut off and never embedded. Section chunks are cut to fit it."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Vectors for passages, in input order; batching is the embedder's job."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """A (dimension,) vector for one query."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens the model's own tokenizer makes of ``text`` (no special tokens)."""
        ...


class EmbedderWrapper:
    """The base of an embedder that wraps ``inner``: the model's facts (fingerprint,
    dimension, window, token count) are ``inner``'s, because a wrapper changes only
    how query or passage vectors are produced, never which model made them (so an
    index built through a wrapper matches one built with ``inner`` itself)."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner

    @property
    def fingerprint(self) -> ModelFingerprint:
        return self._inner.fingerprint

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def window_tokens(self) -> int:
        return self._inner.window_tokens

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)


def file_sha256(path: str, chunk_size: int = 1 << 20) -> str:
    """Digest of a weights file, for the fingerprint."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_size):
            h.update(block)
    return h.hexdigest()


_digest_cache: dict[tuple[str, int, int], str] = {}
_digest_lock = threading.Lock()


def cached_file_sha256(path: Path) -> str:
    """:func:`file_sha256`, computed once per process per (path, size, mtime).

    Embedders verify and fingerprint their weights at load; a process that builds
    several embedders (tests, a server reloading settings) should not rehash them.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        raise EmbeddingError(f"model file not found: {path}") from None
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _digest_lock:
        if key not in _digest_cache:
            _digest_cache[key] = file_sha256(str(path))
        return _digest_cache[key]


def l2_normalise(x: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    arr = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return np.asarray(arr / np.maximum(norms, 1e-12), dtype=np.float32)


def text_list(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, checked: every embedder's ``embed_documents`` starts here.

    A lone string is a sequence of characters and would embed them one by one, and
    a non-string item fails deep inside a tokenizer: both are a caller's mistake,
    named here instead.
    """
    if isinstance(texts, str):
        raise TypeError("embed_documents takes a sequence of strings, not one string")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, not str")
    return list(texts)
