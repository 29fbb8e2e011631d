"""The numpy scorer's arithmetic: a part's bound holds for every posting it may hold.

(That the arithmetic equals the SQL's bit for bit is tested end to end, against
the exhaustive statement on real PostgreSQL, in test_bm25_packed.py.)
"""

from __future__ import annotations

import numpy as np

from ragline.store.postgres.bm25_formula import Formula
from ragline.text import bm25


def test_part_bound_is_never_exceeded() -> None:
    """A part's bound (largest tf, smallest length) is ≥ the contribution of every
    posting it may hold, computed as the scorer computes it."""
    rng = np.random.default_rng(5)
    formula = Formula(bm25.K1, bm25.B)
    for _ in range(200):
        max_tf = rng.integers(0, 6, size=3)
        min_len = rng.integers(1, 80, size=3)
        avg = tuple(float(a) for a in rng.uniform(1, 60, size=3))
        w = tuple(float(x) for x in rng.uniform(0, 9, size=3))
        bound = formula.bound(w, max_tf.tolist(), min_len.tolist(), avg)  # type: ignore[arg-type]
        t1, t2 = formula.tables(8, 400)
        for f in range(3):
            if max_tf[f] == 0:
                assert bound[f] == 0
                continue
            tf = rng.integers(1, max_tf[f] + 1, size=50)
            ln = rng.integers(min_len[f], 400, size=50)
            c = (w[f] * tf) / (t1[tf] + t2[ln] / avg[f])
            assert (c <= bound[f]).all()
            assert c.max() >= bound[f] * 0.3  # not a vacuous bound
