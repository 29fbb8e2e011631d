"""The trace of one answered request (``/api/query``, ``/api/chat``): the stage spans
of :mod:`ragline.tracing` with what the server knows, the query id and the tenant, and
the question's text only under full logging (``RAGLINE_QUERY_LOG_PRIVACY=false``), the
same rule as the query log."""

from __future__ import annotations

import time

from ragline import tracing
from ragline.answer.context import CountTokens
from ragline.serve.shapes import usage_of
from ragline.settings import ServeSettings
from ragline.types import Answer


def trace_answer(
    settings: ServeSettings,
    endpoint: str,
    answer: Answer,
    *,
    query_id: str,
    tenant: str,
    question: str,
    started_ns: int,
    answered_ns: int,
    count_tokens: CountTokens,
    retrieved: int,
) -> None:
    """Record the request's spans (a no-op unless tracing is configured)."""
    if not tracing.active():
        return
    attributes = {
        "ragline.query_id": query_id,
        "ragline.tenant": tenant,
        "ragline.endpoint": endpoint,
    }
    tracing.trace_answer(
        answer,
        name=f"ragline {endpoint}",
        attributes=attributes,
        question=None if settings.query_log_privacy else question,
        started_ns=started_ns,
        answered_ns=answered_ns,
        ended_ns=time.time_ns(),
        usage=usage_of(answer, count_tokens),
        retrieved=retrieved,
    )
