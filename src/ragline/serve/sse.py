"""Server-sent events: the wire format of the streaming routes.

The answer pipeline is synchronous; the routes run it off the loop with
:func:`ragline.aio.iterate_in_thread` (the bridge :class:`~ragline.aio.AsyncRagline`
streams with too), which flushes each event as it exists and, when the client
disconnects, stops the worker and closes the generator's HTTP stream or model loop.
"""

from __future__ import annotations

import json
from typing import Any


def format_event(event: str | None, data: Any) -> bytes:
    """One SSE message; ``data`` is JSON-encoded on a single line (no field injection)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    lines = [f"event: {event}"] if event else []
    lines += [f"data: {line}" for line in payload.split("\n")]
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str = "") -> bytes:
    """An SSE comment line: keeps proxies from buffering or timing the stream out."""
    return f": {text}\n\n".encode()
