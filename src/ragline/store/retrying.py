"""One retry, with backoff, around a store call: a timeout or a lost connection is
often gone a moment later (a restarted server, a failover). Wraps calls from the
outside, for every store alike; a model mismatch is not retried (it will not pass)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ragline.store.base import ModelMismatchError, StoreError

T = TypeVar("T")


def call_with_retry(
    fn: Callable[[], T],
    *,
    retries: int = 1,
    backoff_s: float = 0.25,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``; on a StoreError or OSError, up to ``retries`` more tries after
    ``backoff_s``, 2·``backoff_s``, …; the last error is raised."""
    attempt = 0
    while True:
        try:
            return fn()
        except ModelMismatchError:
            raise
        except (StoreError, OSError):
            if attempt >= retries:
                raise
            sleep(backoff_s * (2**attempt))
            attempt += 1
