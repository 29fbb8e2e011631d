"""When and how long to retry a request to an OpenAI-compatible HTTP endpoint.

The embedder and the generator talk to the same kind of server, so they share one
set of rules: which answers may pass on another try, how long to back off, how to
read ``Retry-After`` and what the server said went wrong. Everything here is pure:
callers pass in the random draw and the clock, and do the waiting themselves.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Literal

#: Request timeout, too early and rate limited: the same request may succeed later.
RETRYABLE_STATUSES = frozenset({408, 425, 429})
#: Longest error text kept from a response body (enough for any real server message).
MESSAGE_CHARS = 500


def is_retryable(status: int) -> bool:
    """True for 408, 425, 429 and every 5xx; any other 4xx fails the same way again."""
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date),
    not capped: what a long wait means is the caller's policy.

    ``now`` is a Unix time (default: the clock). ``None`` when the header is absent
    or unreadable, so the caller backs off instead; a date in the past is 0.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000": HTTP dates are always GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def error_message(body: bytes) -> str:
    """The error text of a response body: OpenAI's ``{"error": {"message"}}``, a bare
    ``{"error": "..."}``, or the body itself; empty when the body is."""
    try:
        payload = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body.decode("utf-8", "replace").strip()[:MESSAGE_CHARS]
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])[:MESSAGE_CHARS]
    if isinstance(err, str):
        return err[:MESSAGE_CHARS]
    return json.dumps(payload)[:MESSAGE_CHARS]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter, and what to do with a long ``Retry-After``.

    ``long_retry_after`` is the one choice that differs between callers: an
    ingestion should rather wait ``max_retry_after_s`` than lose a batch
    (``"cap"``), while a reader waiting for an answer is better served by an
    error than by a minute-long stall (``"fail"``).
    """

    max_retries: int = 4
    base_s: float = 1.0
    cap_s: float = 10.0
    jitter: float = 0.25
    max_retry_after_s: float = 60.0
    long_retry_after: Literal["cap", "fail"] = "fail"

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if not 0 < self.base_s <= self.cap_s:
            raise ValueError(f"need 0 < base_s <= cap_s, got {self.base_s} and {self.cap_s}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")
        if self.max_retry_after_s < 0:
            raise ValueError(f"max_retry_after_s must be >= 0, got {self.max_retry_after_s}")

    def delay(self, attempt: int, rand: float, retry_after: float | None = None) -> float | None:
        """Seconds before retry number ``attempt + 1`` (``attempt`` counts from 0).

        Without ``retry_after``: ``base_s``·2^attempt, ±``jitter`` picked by ``rand``
        (uniform in [0, 1); 0.5 is no jitter), never above ``cap_s``, jitter
        included. Jitter spreads clients that failed together. With it: exactly
        ``retry_after`` up to ``max_retry_after_s``; beyond, ``max_retry_after_s``
        under ``"cap"`` and ``None`` (give up) under ``"fail"``.
        """
        if retry_after is not None:
            if retry_after <= self.max_retry_after_s:
                return retry_after
            return self.max_retry_after_s if self.long_retry_after == "cap" else None
        backoff = min(self.cap_s, self.base_s * 2.0 ** min(attempt, 60))
        return min(self.cap_s, max(0.0, backoff * (1.0 + self.jitter * (2.0 * rand - 1.0))))
