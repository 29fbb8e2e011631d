"""The connection half of QdrantStore: opening the store, the local folder's
guard, the ``store`` point (reread under the lock before every call), paging.
A subclass adds ``_recover`` (the write journal), called as the store opens."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qdrant_client import models

from ragline.store import remote
from ragline.store.base import (
    StoreAbilities,
    StoreError,
)
from ragline.store.qdrant.client import create_chunks, folder_id, local_folder, make_client
from ragline.store.qdrant.points import STORE_ID, StoreState, to_qdrant_filter
from ragline.store.remote import RemoteStore
from ragline.text import bm25
from ragline.types import Filters


class QdrantConnection(RemoteStore[StoreState]):
    """Opens the store; ``location``, ``collection`` and the rest: see QdrantStore."""

    def __init__(
        self,
        location: str | Path,
        *,
        dimension: int,
        collection: str = "ragline",
        api_key: str | None = None,
        timeout_s: int = 30,
        bm25_k1: float = bm25.K1,
        bm25_b: float = bm25.B,
        avgdl_tolerance: float = 0.0,
        hnsw_ef: int = 128,
    ) -> None:
        remote.check_new_store(dimension, "collection", collection)
        super().__init__()
        self.location = str(location)
        self.label = f"Qdrant {self.location}"
        self.name = collection
        self.k1, self.b = bm25_k1, bm25_b
        self.avgdl_tolerance = avgdl_tolerance
        self.hnsw_ef = hnsw_ef
        self._meta = f"{collection}_meta"
        self._api_key, self._timeout_s = api_key, timeout_s
        self._folder = local_folder(location)
        with remote.opening(f"{self.label} ({collection})"):
            self._client = make_client(location, api_key, timeout_s)
            self._opened = folder_id(self._folder) if self._folder is not None else None
            if not self._client.collection_exists(self._meta):
                self._client.create_collection(self._meta, vectors_config={})
                self._client.create_payload_index(
                    self._meta, "kind", models.PayloadSchemaType.KEYWORD
                )
                self._client.create_payload_index(
                    self._meta, "tenant", models.PayloadSchemaType.KEYWORD
                )
            found = self._client.retrieve(self._meta, [STORE_ID], with_payload=True)
            if found:
                self._state = StoreState.from_payload(found[0].payload or {})
            else:
                state = StoreState(f"{collection}_chunks", 0, dimension, None, {})
                create_chunks(self._client, state.chunks, dimension)
                self._put_state(state)
            self._recover()

        self.abilities = StoreAbilities(describe=self.index_info)

    def _recover(self) -> None:
        """Finish interrupted writes (the journal lives in a subclass)."""

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"Qdrant store {self.name!r} is closed")
        if self._folder is not None:
            self._check_folder(self._folder)

    def _check_folder(self, folder: Path) -> None:
        """Local mode: fail while the folder is gone; reopen on a replaced one."""
        try:
            now = folder_id(folder)
        except OSError as exc:
            raise StoreError(f"Qdrant local folder {folder} is unavailable: {exc}") from exc
        if now == self._opened:
            return
        with self._lock:
            if now == self._opened:  # another thread reopened it meanwhile
                return
            with contextlib.suppress(Exception):
                self._client.close()
            try:
                self._client = make_client(folder, self._api_key, self._timeout_s)
            except Exception as exc:
                raise StoreError(f"Qdrant local folder {folder}: cannot reopen: {exc}") from exc
            self._opened = now

    def _fresh(self) -> StoreState:
        """The store point as it is now (another process may have rebuilt)."""
        self._check_open()
        found = self._call(
            "reading the store point",
            self._client.retrieve,
            self._meta,
            [STORE_ID],
            with_payload=True,
        )
        if not found:
            raise StoreError(
                f"Qdrant {self.location}: collection {self._meta} lost its store point"
            )
        self._state = StoreState.from_payload(found[0].payload or {})
        return self._state

    def _put_state(self, state: StoreState) -> None:
        self._client.upsert(
            self._meta,
            [models.PointStruct(id=STORE_ID, vector={}, payload=state.payload())],
            wait=True,
        )
        self._state = state

    def _scroll(
        self,
        collection: str,
        flt: models.Filter | None,
        *,
        with_payload: bool | list[str] = True,
        with_vectors: bool | list[str] = False,
        batch: int = 1024,
    ) -> Iterator[list[models.Record]]:
        offset: Any = None
        while True:
            points, offset = self._call(
                "scroll",
                self._client.scroll,
                collection,
                scroll_filter=flt,
                limit=batch,
                offset=offset,
                with_payload=with_payload,
                with_vectors=with_vectors,
            )
            if points:
                yield points
            if offset is None:
                return

    def _count(self, filters: Filters | None = None) -> int:
        with self._lock:
            state = self._fresh()
            result = self._call(
                "count",
                self._client.count,
                state.chunks,
                count_filter=to_qdrant_filter(filters),
                exact=True,
            )
            return int(result.count)

    def index_info(self) -> dict[str, Any]:
        state = self._fresh()
        info = self._call("collection info", self._client.get_collection, state.chunks)
        return {
            "location": self.location,
            "collection": state.chunks,
            "rows": self._count(),
            "dimension": state.dimension,
            "payload_indexes": sorted((info.payload_schema or {}).keys()),
            "vector_search": "hnsw" if self.location.startswith(("http", "qdrant:")) else "exact",
        }

    def _release(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
