"""Embedders: the :class:`Embedder` protocol and its backends.

Backends live in their own modules (``ragline.embed.onnx``,
``.sentence_transformers``, ``.openai``) and are chosen by
``ragline.embed.factory.make_embedder``. Only the protocol's names are imported
here: ``ragline.store.base`` imports this package, and the settings import the
store, so importing the factory here would be circular.
"""

from ragline.embed.base import Embedder, EmbeddingError, ModelFingerprint, Vectors

__all__ = ["Embedder", "EmbeddingError", "ModelFingerprint", "Vectors"]
