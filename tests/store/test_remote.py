"""The shared plumbing of the server-backed stores (ragline.store.remote)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.store.contract import make_chunk

from ragline.store.base import StoreError
from ragline.store.remote import (
    batches,
    check_format,
    check_new_store,
    fill,
    guarded,
    opening,
    query_vector,
)
from ragline.types import Chunk


def _chunk(i: int) -> Chunk:
    return make_chunk("d", i, f"text {i}")


def test_guarded_names_the_store_and_the_step() -> None:
    def boom() -> None:
        raise ConnectionError("refused")

    with pytest.raises(StoreError, match=r"^Qdrant http://h:1: upsert failed: refused$"):
        guarded("Qdrant http://h:1", "upsert", boom)


def test_guarded_lets_the_named_errors_through() -> None:
    def bad_filter() -> None:
        raise ValueError("unknown filter field 'x'")

    with pytest.raises(ValueError, match="unknown filter field"):
        guarded("Chroma /tmp/c", "count", bad_filter, passes=(StoreError, ValueError))
    with pytest.raises(StoreError, match="count failed: unknown filter field"):
        guarded("Chroma /tmp/c", "count", bad_filter)
    assert guarded("x", "sum", sum, [1, 2]) == 3


def test_opening_wraps_a_failure_but_not_a_store_error() -> None:
    label = "FalkorDB falkordb://h:1/g"
    with (
        pytest.raises(StoreError, match=r"^FalkorDB falkordb://h:1/g: cannot open: no route$"),
        opening(label),
    ):
        raise OSError("no route")
    with pytest.raises(StoreError, match=r"^as it was$"), opening(label):
        raise StoreError("as it was")


def test_new_store_checks_dimension_and_name() -> None:
    check_new_store(3, "collection", "kb_1-a")
    with pytest.raises(ValueError, match="dimension must be positive, got 0"):
        check_new_store(0, "collection", "kb")
    with pytest.raises(ValueError, match=r"graph 'a b': use letters"):
        check_new_store(3, "graph", "a b")


def test_state_format_is_checked() -> None:
    check_format("Qdrant", 1, 1)
    with pytest.raises(StoreError, match=r"Chroma store format 2 is not supported .*format 1"):
        check_format("Chroma", 2, 1)


def test_query_vector_is_flat_float32_of_the_stored_size() -> None:
    q = query_vector([[1, 2, 3]], 3)
    assert q.dtype == np.float32 and q.shape == (3,)
    with pytest.raises(StoreError, match="dimension 2 but the index stores 3"):
        query_vector([1.0, 2.0], 3)
    with pytest.raises(StoreError, match="NaN or infinite"):
        query_vector([1.0, float("nan"), 0.0], 3)


def test_fill_skips_empty_batches_and_discards_on_failure() -> None:
    written: list[list[str]] = []
    discarded: list[bool] = []
    vecs = np.ones((2, 3), np.float32)
    count = fill(
        [([_chunk(0), _chunk(1)], vecs), ([], np.zeros((0, 3), np.float32))],
        3,
        lambda chunks, v: written.append([c.id for c in chunks]),
        lambda: discarded.append(True),
    )
    assert count == 2 and len(written) == 1 and len(written[0]) == 2 and not discarded

    with pytest.raises(StoreError):  # vectors of the wrong size: the target is dropped
        fill(
            [([_chunk(0)], np.ones((1, 4), np.float32))],
            3,
            lambda chunks, v: written.append([c.id for c in chunks]),
            lambda: discarded.append(True),
        )
    assert discarded == [True]


def test_fill_runs_then_after_the_chunks_and_discards_when_it_fails() -> None:
    steps: list[str] = []

    def then() -> None:
        steps.append("then")
        raise OSError("records")

    with pytest.raises(OSError):
        fill(
            [([_chunk(0)], np.ones((1, 3), np.float32))],
            3,
            lambda chunks, v: steps.append("write"),
            lambda: steps.append("discard"),
            then=then,
        )
    assert steps == ["write", "then", "discard"]


def test_batches_cover_everything_in_order() -> None:
    assert [list(b) for b in batches(list(range(5)), 2)] == [[0, 1], [2, 3], [4]]
    assert list(batches([], 3)) == []
