"""The one place that turns settings into an embedder."""

from __future__ import annotations

from pathlib import Path

from ragline.embed.base import Embedder
from ragline.settings import EmbedSettings


def make_embedder(settings: EmbedSettings) -> Embedder:
    """The embedder ``settings.embedder`` names, configured from the ``embed_*`` settings.

    For ``onnx``, a non-empty ``embed_model`` is the path of another ONNX encoder
    file (with the MiniLM tokenizer); empty means the packaged all-MiniLM-L6-v2.
    Backends are imported here, lazily, so choosing ONNX never imports torch. The ONNX
    embedder comes wrapped so that concurrent query embeddings share model runs
    (``embed_query_batch``). ``auto`` not yet resolved for an index (see
    :mod:`ragline.embed.choice`; :class:`~ragline.engine.Ragline` resolves it) is the
    English default, ONNX.
    """
    if settings.embedder in ("onnx", "auto"):
        from ragline.embed.coalesce import coalescing
        from ragline.embed.onnx import OnnxEmbedder

        onnx = OnnxEmbedder(
            Path(settings.embed_model) if settings.embed_model else None,
            max_tokens=settings.embed_max_tokens,
            batch_size=settings.embed_batch_size,
            threads=settings.embed_threads,
        )
        return coalescing(onnx, settings.embed_query_batch, settings.embed_query_runs)
    if settings.embedder == "sentence-transformers":
        from ragline.embed.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(
            settings.embed_model,
            batch_size=settings.embed_batch_size,
            max_tokens=settings.embed_max_tokens,
        )
    if settings.embedder == "openai":
        from ragline.embed.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            settings.embed_base_url,
            settings.embed_api_key,
            settings.embed_model,
            batch_size=settings.embed_batch_size,
            timeout_s=settings.embed_timeout_s,
            max_retries=settings.embed_max_retries,
            dimension=settings.embed_dimension,
            max_tokens=settings.embed_max_tokens,
        )
    if settings.embedder == "e5":
        from ragline.embed.e5 import E5Embedder

        return E5Embedder(batch_size=settings.embed_batch_size, threads=settings.embed_threads)
    raise ValueError(f"unknown embedder {settings.embedder!r} (settings field 'embedder')")
