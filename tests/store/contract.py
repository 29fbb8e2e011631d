"""The store registry of the contract suite (tests/store/test_contract.py).

Every store ragline ships registers a factory here and must pass every contract
test unchanged. A factory gets a :class:`ContractEnv` and returns an open store;
called twice with the same env (or in a child process with an env rebuilt from
:meth:`ContractEnv.to_json`), it opens the SAME index again.

Adding a store: write ``_make_<name>(env) -> Store`` below and add it to
:data:`STORE_BACKENDS`. If it needs a pytest fixture (a server URL), name the
fixture in :data:`BACKEND_FIXTURES`: its value is resolved in the test process
and handed over in ``env.options`` (also to child processes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ragline.store.base import Store


@dataclass(frozen=True)
class ContractEnv:
    """Where one test's store lives.

    ``path``: a fresh folder of its own. ``name``: unique per test, ``[a-z0-9_]``,
    starting with a letter (a schema, collection or table prefix). ``options``:
    values of :data:`BACKEND_FIXTURES` for this backend (e.g. ``pg_url``).
    """

    path: Path
    dimension: int
    name: str
    options: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "path": str(self.path),
                "dimension": self.dimension,
                "name": self.name,
                "options": dict(self.options),
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ContractEnv:
        d = json.loads(text)
        return cls(Path(d["path"]), int(d["dimension"]), str(d["name"]), dict(d["options"]))


StoreFactory = Callable[[ContractEnv], Store]


def _make_lance(env: ContractEnv) -> Store:
    from ragline.store.lance import LanceStore

    return LanceStore(env.path / "lance", dimension=env.dimension)


def _make_qdrant(env: ContractEnv) -> Store:
    from ragline.store.qdrant import QdrantStore

    return QdrantStore(env.path / "qdrant", dimension=env.dimension, collection=env.name)


def _make_postgres(env: ContractEnv) -> Store:
    from ragline.store.postgres import PostgresStore

    return PostgresStore(env.options["url"], dimension=env.dimension, schema=env.name)


#: Store name → factory. Every contract test runs once per entry.
STORE_BACKENDS: dict[str, StoreFactory] = {
    "lance": _make_lance,
    "qdrant": _make_qdrant,
    "postgres": _make_postgres,
}

#: Store name → {option name: pytest fixture name} resolved into ``ContractEnv.options``.
BACKEND_FIXTURES: dict[str, dict[str, str]] = {"postgres": {"url": "pg_url"}}
