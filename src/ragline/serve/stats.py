"""``ragline stats``: what the query log says about a tenant's recent requests —
counts by seed status, per-stage latency percentiles (first token included), the
fallback rate and the tokens spent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragline.latency import quantiles, stage_quantiles
from ragline.serve.querylog import QueryLogRow


def summarize(rows: Sequence[QueryLogRow]) -> dict[str, Any]:
    """The summary of ``rows`` (pure): counts, statuses, endpoints, latencies."""
    answered = [r for r in rows if r.status == "success" and r.latencies_ms]
    stages = stage_quantiles(
        {k: v for k, v in r.latencies_ms.items() if "." not in k} for r in answered
    )
    return {
        "requests": len(rows),
        "by_status": dict(Counter(r.status for r in rows).most_common()),
        "by_endpoint": dict(Counter(r.endpoint for r in rows).most_common()),
        "response_time_ms": quantiles([r.response_time_ms for r in rows if r.response_time_ms]),
        "stages_ms": stages,
        "fallback_rate": round(sum(r.fallback for r in answered) / len(answered), 4)
        if answered
        else 0.0,
        "total_tokens": sum(r.total_tokens for r in rows),
        "first": min((r.created_at for r in rows), default=None),
        "last": max((r.created_at for r in rows), default=None),
    }
