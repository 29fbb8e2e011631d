"""LanceDB's rows (Arrow tables) back into Chunks and vector matrices, column-wise.

Shared by :mod:`ragline.store.lance` (its queries) and
:mod:`ragline.store.lance_memory` (the mirror it builds from the same rows), so
neither imports the other's module for them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ragline.embed.base import Vectors
from ragline.store.base import CHUNK_COLUMNS, chunk_from_row
from ragline.types import Chunk


def arrow_to_chunks(table: pa.Table | pa.RecordBatch) -> list[Chunk]:
    """Rows (with at least :data:`CHUNK_COLUMNS`) back into Chunks, column-wise."""
    cols = [table.column(name).to_pylist() for name in CHUNK_COLUMNS]
    return [chunk_from_row(row) for row in zip(*cols, strict=True)]


def arrow_vectors(table: pa.Table | pa.RecordBatch, dimension: int) -> Vectors:
    """The ``vector`` column as an (n, dimension) float32 matrix (no Python loop)."""
    col = table.column("vector")
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(arr) == 0:
        return np.zeros((0, dimension), dtype=np.float32)
    if pa.types.is_fixed_size_list(arr.type):  # its values buffer: no pyarrow.compute
        size = arr.type.list_size
        flat = arr.values.slice(arr.offset * size, len(arr) * size)
    else:
        flat = arr.flatten()
    values = flat.to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.float32).reshape(len(arr), dimension)
