"""Arrow rows back into Chunks and vectors: what LanceStore writes comes back equal."""

from __future__ import annotations

import numpy as np
from tests.store.contract import DIM, make_chunk, unit

from ragline.store.arrow import arrow_to_chunks, arrow_vectors
from ragline.store.lance_tables import chunks_to_arrow


def test_rows_written_come_back_as_the_same_chunks_and_vectors() -> None:
    chunks = [make_chunk("guide", i, f"passage {i} about puffins") for i in range(3)]
    vectors = unit(np.random.default_rng(7), len(chunks))
    table = chunks_to_arrow(chunks, vectors, DIM)
    assert arrow_to_chunks(table) == chunks
    back = arrow_vectors(table, DIM)
    assert back.dtype == np.float32 and back.shape == (3, DIM)
    np.testing.assert_array_equal(back, vectors)
    for batch in table.to_batches():  # a record batch reads the same way
        assert arrow_to_chunks(batch) == chunks[: batch.num_rows]


def test_an_empty_table_is_an_empty_matrix_of_the_right_width() -> None:
    empty = chunks_to_arrow([], np.zeros((0, DIM), np.float32), DIM)
    assert arrow_to_chunks(empty) == []
    assert arrow_vectors(empty, DIM).shape == (0, DIM)
