"""The all-MiniLM-L6-v2 WordPiece tokenizer, shipped with ragline.

The int8 ONNX model package carries no tokenizer, so ragline ships the model's
``tokenizer.json`` (Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2;
see ``assets/NOTICE``). Chunk token counts use it too, so chunk budgets are
measured in the tokens the embedder really sees.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from tokenizers import Tokenizer

MINILM_TOKENIZER = "minilm-tokenizer.json"


def read_tokenizer(name: str = MINILM_TOKENIZER) -> Tokenizer:
    """A tokenizer of its own, padding and truncation off, read from the shipped file
    (one parse, where copying the shared one serialises it and parses it again)."""
    path = resources.files("ragline.embed") / "assets" / name
    tok = Tokenizer.from_str(path.read_text(encoding="utf-8"))
    tok.no_padding()
    tok.no_truncation()
    return tok


@lru_cache(maxsize=4)
def load_tokenizer(name: str = MINILM_TOKENIZER) -> Tokenizer:
    """The shared tokenizer, padding and truncation off. It is cached: callers that
    need truncation or padding must work on a copy, never mutate this one."""
    return read_tokenizer(name)


class TokenCounter:
    """Counts tokens the way the embedding model does (special tokens excluded).
    The shared tokenizer is loaded on the first count: a search never counts."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self._tokenizer = tokenizer

    @property
    def _tok(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer()
        return self._tokenizer

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_many(self, texts: list[str]) -> list[int]:
        """Batch form (the Rust tokenizer parallelises it)."""
        encs = self._tok.encode_batch_fast(texts, add_special_tokens=False)
        return [len(e.ids) for e in encs]
