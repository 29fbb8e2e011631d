"""``falkordb://HOST:PORT/GRAPH``: a FalkorDB server (the Cypher graph store); the
graph defaults to ``ragline``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragline.store.address import StoreBackend, StoreLocation, server_and_name

if TYPE_CHECKING:
    from ragline.settings import Settings
    from ragline.store.base import IndexStore


def parse(scheme: str, text: str) -> StoreLocation:
    server, name = server_and_name(text, "falkordb://HOST:PORT/GRAPH")
    return StoreLocation("falkordb", f"redis://{server}", {"graph": name})


def open_store(location: StoreLocation, settings: Settings, dimension: int) -> IndexStore:
    from ragline.store.graph.store import GraphStore

    return GraphStore(
        location.target,
        dimension=dimension,
        graph=location.options.get("graph") or "ragline",
        hnsw_m=settings.hnsw_m,
        hnsw_ef_construction=settings.hnsw_ef_construction,
        hnsw_ef=max(settings.ann_ef, 200),
        boosts=settings.boosts,
    )


FALKORDB = StoreBackend("falkordb", ("falkordb",), parse, open_store)
