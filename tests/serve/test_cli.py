"""`ragline serve`'s uvicorn options, on real servers started with them: forwarded
headers are believed only from the proxies the operator lists."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .conftest import LiveServer


def _statuses(live: LiveServer, forwarded_for: Callable[[int], str], n: int) -> list[int]:
    with live.client() as c:
        return [
            c.post(
                "/api/search",
                json={"query": "what is rrf?"},
                headers={"X-Forwarded-For": forwarded_for(i)},
            ).status_code
            for i in range(n)
        ]


def test_a_spoofed_forwarded_for_does_not_get_around_the_rate_limit(
    docs_index: Path, serve: Callable[..., LiveServer]
) -> None:
    """By default no proxy is trusted, loopback included: a caller naming a new
    address on every request is still one client (it was 313 of 313 let through)."""
    live = serve(docs_index, rate_limit_per_minute=3)
    statuses = _statuses(live, lambda i: f"203.0.113.{i + 1}", 5)
    assert statuses == [200, 200, 200, 429, 429]


def test_a_configured_proxy_is_believed(docs_index: Path, serve: Callable[..., LiveServer]) -> None:
    """Behind a listed proxy each forwarded client has its own limit, and one client
    is still limited."""
    live = serve(docs_index, rate_limit_per_minute=3, serve_trusted_proxies=("127.0.0.1",))
    assert _statuses(live, lambda i: f"203.0.113.{i + 1}", 5) == [200] * 5
    assert _statuses(live, lambda i: "198.51.100.7", 5) == [200, 200, 200, 429, 429]
