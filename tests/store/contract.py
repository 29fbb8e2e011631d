"""The store registry of the contract suite (tests/store/test_contract.py).

Every store ragline ships registers a factory here and must pass every contract
test unchanged. A factory gets a :class:`ContractEnv` and returns an open store;
called twice with the same env (or in a child process with an env rebuilt from
:meth:`ContractEnv.to_json`), it opens the SAME index again.

It also holds the chunk and write helpers the store tests share (test_contract.py,
test_lance.py and the writer processes they kill).

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

import numpy as np

from ragline.embed.base import Vectors
from ragline.store.base import DocumentWrite, Store
from ragline.types import Chunk, DocumentRecord, Hit

#: Vector dimension of the store tests (random unit vectors, no model needed).
DIM = 16


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


def _make_chroma(env: ContractEnv) -> Store:
    from ragline.store.chroma import ChromaStore

    return ChromaStore(
        env.options["url"],
        dimension=env.dimension,
        collection=env.name,
        terms_path=env.path / "chroma-terms.sqlite",
    )


def _make_chroma_local(env: ContractEnv) -> Store:
    from ragline.store.chroma import ChromaStore

    return ChromaStore(env.path / "chroma", dimension=env.dimension, collection=env.name)


def _make_falkordb(env: ContractEnv) -> Store:
    from ragline.store.graph import GraphStore

    return GraphStore(env.options["url"], dimension=env.dimension, graph=env.name)


#: Store name → factory. Every contract test runs once per entry.
STORE_BACKENDS: dict[str, StoreFactory] = {
    "lance": _make_lance,
    "qdrant": _make_qdrant,
    "postgres": _make_postgres,
    "chroma": _make_chroma,
    "chroma_local": _make_chroma_local,
    "falkordb": _make_falkordb,
}

#: Store name → {option name: pytest fixture name} resolved into ``ContractEnv.options``.
BACKEND_FIXTURES: dict[str, dict[str, str]] = {
    "postgres": {"url": "pg_url"},
    "chroma": {"url": "chroma_url"},
    "falkordb": {"url": "falkordb_url"},
}


# ------------------------------------------------------------------- helpers


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> Vectors:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    out: Vectors = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return out


def make_chunk(
    doc_id: str,
    i: int,
    text: str,
    *,
    tenant: str = "acme",
    title: str = "Deep Learning Notes",
    chapter: str = "basics",
    heading_path: tuple[str, ...] = ("Deep Learning Notes", "Basics"),
    has_code: bool = False,
    has_equations: bool = False,
    page: int | None = None,
    metadata: dict[str, object] | None = None,
) -> Chunk:
    return Chunk(
        id=f"{tenant}/{doc_id}/{i}",
        doc_id=doc_id,
        tenant=tenant,
        source=f"docs/{doc_id}.md",
        title=title,
        chapter=chapter,
        section=heading_path[-1] if heading_path else "",
        heading_path=heading_path,
        url=f"file:///docs/{doc_id}.md#s{i}",
        anchor=f"s{i}",
        chunk_index=i,
        start_char=100 * i,
        end_char=100 * i + len(text),
        token_count=len(text.split()) + 3,
        word_count=len(text.split()),
        has_code=has_code,
        has_equations=has_equations,
        content_hash=f"hash-{doc_id}-{text}",
        created_at="2024-05-01T12:00:00Z",
        text=text,
        page=page,
        metadata=metadata or {},
    )


def record_for(doc_id: str, chunks: list[Chunk], tenant: str = "acme") -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id,
        tenant=tenant,
        source=f"docs/{doc_id}.md",
        file_hash=f"file-{len(chunks)}",
        chunk_count=len(chunks),
        token_count=sum(c.token_count for c in chunks),
        chapter=chunks[0].chapter if chunks else "",
        title=chunks[0].title if chunks else "",
        format="markdown",
        ingested_at="2024-05-01T12:00:00Z",
    )


def write(
    store: Store,
    doc_id: str,
    texts: list[str],
    vectors: Vectors | None = None,
    *,
    seed: int = 0,
    tenant: str = "acme",
    **chunk_kw: object,
) -> tuple[list[Chunk], Vectors]:
    chunks = [
        make_chunk(doc_id, i, t, tenant=tenant, **chunk_kw)  # type: ignore[arg-type]
        for i, t in enumerate(texts)
    ]
    vecs = unit(np.random.default_rng(seed), len(chunks)) if vectors is None else vectors
    store.replace_documents([DocumentWrite(record_for(doc_id, chunks, tenant), chunks, vecs)])
    return chunks, vecs


def ids(hits: list[Hit]) -> list[str]:
    return [h.chunk.id for h in hits]


def all_chunks(store: Store) -> list[Chunk]:
    return [c for batch, _ in store.iter_chunks(7) for c in batch]


PASSAGES = [
    "Gradient descent updates the parameters in the direction of the negative gradient.",
    "Convolutional layers share weights across spatial positions of an image.",
    "Attention lets a model weigh every token of the input when encoding one token.",
    "Dropout randomly zeroes activations during training to reduce overfitting.",
    "Batch normalization rescales activations using statistics of the minibatch.",
    "Recurrent networks carry a hidden state from one time step to the next.",
]
