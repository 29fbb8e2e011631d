"""``ragline stats``: what the query log says about a tenant's recent requests —
counts by seed status, per-stage latency percentiles (first token included), the
fallback rate, the tokens spent, and the answers' feedback (helpful rate, citation
click rate) per day."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ragline.latency import quantiles, stage_quantiles
from ragline.serve.feedback import FeedbackRow, summarize_feedback
from ragline.serve.querylog import QueryLogRow


def feedback_summary(
    rows: Sequence[QueryLogRow], feedback: Sequence[FeedbackRow]
) -> dict[str, Any]:
    """Helpful and citation click rates over the answers among ``rows``, overall and
    per day (see :func:`~ragline.serve.feedback.summarize_feedback`)."""
    answers = [(r.query_id, r.created_at, r.citations) for r in rows if r.answer_hash]
    days = summarize_feedback(answers, feedback)
    rated = sum(d["rated"] for d in days)
    cited = sum(d["with_citations"] for d in days)
    return {
        "answers": sum(d["answers"] for d in days),
        "rated": rated,
        "helpful_rate": round(sum(d["helpful"] for d in days) / rated, 4) if rated else None,
        "with_citations": cited,
        "citation_click_rate": round(sum(d["clicked"] for d in days) / cited, 4) if cited else None,
        "by_day": days,
    }


def summarize(rows: Sequence[QueryLogRow], feedback: Sequence[FeedbackRow] = ()) -> dict[str, Any]:
    """The summary of ``rows`` (pure): counts, statuses, endpoints, latencies, and the
    ``feedback`` on their answers."""
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
        "feedback": feedback_summary(rows, feedback),
    }
