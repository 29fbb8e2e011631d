"""The app's routes as one flat list: FastAPI (0.165) keeps an included router as a
single ``_IncludedRouter`` entry, so code that matches a request against routes (the
metric label, the ``Allow`` header) must look inside it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from starlette.routing import BaseRoute


def flat_routes(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """Each route, with included routers replaced by their own routes (in order)."""
    for route in routes:
        inner: Any = getattr(route, "original_router", None)
        if inner is not None and hasattr(inner, "routes"):
            yield from flat_routes(inner.routes)
        else:
            yield route
