"""ServeMiddleware's metric label: the route template, remembered per path and bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragline.serve import middleware
from ragline.serve.app import create_app
from ragline.serve.middleware import ServeMiddleware
from ragline.settings import Settings

CASES = [
    ("POST", "/api/search", "/api/search"),
    ("POST", "/api/query", "/api/query"),
    ("GET", "/api/documents", "/api/documents"),
    ("DELETE", "/api/documents/abc", "/api/documents/{doc_id}"),
    ("GET", "/api/documents/xyz", "/api/documents/{doc_id}"),
    ("PUT", "/api/search", "/api/search"),  # wrong method: the path's template (405)
    ("GET", "/static/app.js", "/static"),
    ("GET", "/nowhere", "unmatched"),
]


@pytest.fixture
def mw(tmp_path: Path) -> ServeMiddleware:
    app = create_app(Settings(index_dir=tmp_path, query_log_enabled=False))

    async def inner(scope: object, receive: object, send: object) -> None:
        return None

    return ServeMiddleware(inner, app.state.serve, app)


def scope(method: str, path: str) -> dict[str, object]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def test_labels_are_route_templates_and_stay_so_when_remembered(mw: ServeMiddleware) -> None:
    for _ in range(3):  # first the routes are matched, then the memory answers
        for method, path, label in CASES:
            assert mw._endpoint(scope(method, path)) == label, (method, path)
    assert mw._endpoints[("POST", "", "/api/search")] == "/api/search"


def test_memory_is_bounded(mw: ServeMiddleware, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(middleware, "ENDPOINT_MEMORY", 3)
    for i in range(20):
        assert mw._endpoint(scope("GET", f"/api/documents/d{i}")) == "/api/documents/{doc_id}"
        assert len(mw._endpoints) <= 3
    assert mw._endpoint(scope("POST", "/api/search")) == "/api/search"
