"""Names a package exports but imports only on first use (PEP 562).

A package whose modules pull in a heavy client library (psycopg, qdrant-client)
still has to be importable cheaply: ``ragline.store.url`` reads each backend's
address module, and importing ``ragline.store.qdrant.address`` runs
``ragline/store/qdrant/__init__.py`` first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module
from typing import Any


def lazy_getattr(
    package: str, locations: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``locations[name]`` (a module path) on the
    first lookup of ``name`` and keeps the value in ``namespace`` (the package's
    ``globals()``), so the next lookup does not come here."""

    def __getattr__(name: str) -> Any:
        module = locations.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
