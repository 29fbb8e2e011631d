"""A sentence-transformers backend, for any model folder already on disk.

For users with another local model (bge, e5, a fine-tuned MiniLM). torch and
sentence-transformers are an optional extra, imported only when this backend is
used; ragline never downloads a model, so ``model`` must be a local folder.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragline.embed.base import (
    EmbeddingError,
    ModelFingerprint,
    Vectors,
    cached_file_sha256,
    l2_normalise,
    text_list,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

INSTALL_HINT = "pip install -e '.[st]' torch==2.13.0"
WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


def weight_files(folder: Path) -> list[Path]:
    """The folder's weight files (submodules included), in a stable order."""
    found = {p for pattern in WEIGHT_PATTERNS for p in folder.rglob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def folder_digest(folder: Path, name: str) -> str:
    """sha256 over each weight file's relative path and sha256, then the model name."""
    files = weight_files(folder)
    if not files:
        raise EmbeddingError(
            f"{folder}: no weight files (*.safetensors, *.bin) in the model folder"
        )
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(folder).as_posix().encode("utf-8"))
        h.update(cached_file_sha256(f).encode("ascii"))
    h.update(name.encode("utf-8"))
    return h.hexdigest()


class SentenceTransformerEmbedder:
    """Embeds with ``sentence_transformers.SentenceTransformer`` from a local folder.

    The model loads on first use (thread-safe), so building the embedder is cheap;
    the fingerprint's name is the folder's last two path parts, which stays the
    same wherever the folder is installed.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        batch_size: int = 32,
        device: str = "cpu",
        max_tokens: int | None = None,
    ) -> None:
        folder = Path(model).expanduser()
        if not folder.is_dir():
            raise EmbeddingError(
                f"sentence-transformers model folder not found: {model!s} "
                "(ragline never downloads models: give the path of a local model folder)"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_tokens is not None and max_tokens < 3:
            raise ValueError(f"max_tokens must be >= 3 or None, got {max_tokens}")
        self._folder = folder.resolve()
        self._name = f"{self._folder.parent.name}/{self._folder.name}"
        self._batch_size = batch_size
        self._device = device
        self._max_tokens = max_tokens
        self._lock = threading.Lock()
        self._model: SentenceTransformer | None = None
        self._fingerprint: ModelFingerprint | None = None

    @property
    def model_folder(self) -> Path:
        return self._folder

    @property
    def batch_size(self) -> int:
        return self._batch_size

    def _load(self) -> SentenceTransformer:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                model = self._open()
                dim = model.get_embedding_dimension()
                if not dim:
                    raise EmbeddingError(
                        f"{self._folder}: the model reports no embedding dimension"
                    )
                digest = folder_digest(self._folder, self._name)
                self._fingerprint = ModelFingerprint(self._name, int(dim), digest)
                self._model = model
            return self._model

    def _open(self) -> SentenceTransformer:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                f"the sentence-transformers embedder needs the 'st' extra: {INSTALL_HINT}"
            ) from exc
        try:
            # A local folder plus local_files_only: the hub is never contacted.
            model = SentenceTransformer(
                str(self._folder),
                device=self._device,
                local_files_only=True,
                trust_remote_code=False,
            )
        except Exception as exc:  # torch/transformers raise many unrelated types
            raise EmbeddingError(
                f"{self._folder}: sentence-transformers cannot load the model: {exc}"
            ) from exc
        if self._max_tokens is not None:
            model.max_seq_length = self._max_tokens
        model.eval()
        return model

    @property
    def fingerprint(self) -> ModelFingerprint:
        self._load()
        assert self._fingerprint is not None
        return self._fingerprint

    @property
    def dimension(self) -> int:
        return self.fingerprint.dimension

    @property
    def max_tokens(self) -> int:
        return int(self._load().max_seq_length or 0)

    @property
    def window_tokens(self) -> int:
        """``max_seq_length`` less the tokenizer's special tokens (2 for BERT)."""
        model = self._load()
        specials = model.tokenizer.num_special_tokens_to_add(pair=False)
        return max(1, int(model.max_seq_length or 0) - int(specials))

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        items = text_list(texts)
        model = self._load()
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors: Any = model.encode(
            items,
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return l2_normalise(np.asarray(vectors, dtype=np.float32))

    def embed_query(self, text: str) -> Vectors:
        return np.asarray(self.embed_documents([text])[0], dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        """Tokens of the model's own tokenizer, special tokens excluded, untruncated."""
        if not text:
            return 0
        tokenizer = self._load().tokenizer
        ids = tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)
        return len(ids["input_ids"])
