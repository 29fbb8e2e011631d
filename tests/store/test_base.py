"""Pure helpers every store shares (store/base.py)."""

from __future__ import annotations

import pytest

from ragline.embed.base import ModelFingerprint
from ragline.store.base import StoreError, takes_new_dimension

WIDE = ModelFingerprint(name="wide", dimension=768, digest="d" * 64)


def test_an_empty_index_takes_a_new_models_dimension_and_a_full_one_refuses() -> None:
    asked: list[int] = []

    def count(n: int) -> int:
        asked.append(n)
        return n

    assert not takes_new_dimension(WIDE, 768, lambda: count(5))
    assert asked == []  # same dimension: the store is not asked to count
    assert takes_new_dimension(WIDE, 384, lambda: count(0))
    with pytest.raises(StoreError, match=r"'wide' makes 768-dim vectors .* 384-dim"):
        takes_new_dimension(WIDE, 384, lambda: count(3))
    assert asked == [0, 3]
