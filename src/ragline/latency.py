"""Latency percentiles (p50/p95/p99) of per-stage timings, for ``ragline stats``
(``/metrics`` has histograms instead): one pure function over millisecond samples,
linear interpolation (numpy's default, as the eval reports use)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

QUANTILES: tuple[int, ...] = (50, 95, 99)


def quantiles(values_ms: Sequence[float], qs: Sequence[int] = QUANTILES) -> dict[str, float]:
    """``{"p50": …, "p95": …, "p99": …}`` of the samples (empty → {})."""
    if not values_ms:
        return {}
    found = np.percentile(np.asarray(values_ms, dtype=np.float64), list(qs))
    return {f"p{q}": round(float(v), 3) for q, v in zip(qs, found, strict=True)}


def stage_quantiles(
    timings: Iterable[Mapping[str, float]], qs: Sequence[int] = QUANTILES
) -> dict[str, dict[str, float]]:
    """Per stage (retrieve, generate, first_token, total, …), the percentiles of its
    samples over all the timings that have it."""
    samples: dict[str, list[float]] = {}
    for row in timings:
        for stage, ms in row.items():
            samples.setdefault(stage, []).append(float(ms))
    return {stage: quantiles(values, qs) for stage, values in sorted(samples.items())}
