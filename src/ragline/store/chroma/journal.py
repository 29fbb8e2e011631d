"""The write journal of ChromaStore: what one interrupted write was about to do.

Chroma has no multi-record transaction, so a batch of document replacements is
journalled (see :mod:`ragline.store.chroma.store`): a ``write`` record in the meta
collection names the documents, their new records, the documents to drop, the
number of new chunks and the store generation the write leads to. Recovery reads
it back and rolls the write forward (all new chunks present) or back. Pure:
encoding only, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ragline.types import DocumentRecord


@dataclass(frozen=True, slots=True)
class Journal:
    """One write in flight: ``write`` tags its new chunk records."""

    write: str
    generation: str
    doc_ids: tuple[str, ...]
    records: tuple[DocumentRecord, ...]
    drop: tuple[str, ...]
    chunks: int

    def to_metadata(self) -> dict[str, str | int]:
        """As Chroma metadata (flat scalars: lists travel as JSON text)."""
        return {
            "kind": "write",
            "write": self.write,
            "generation": self.generation,
            "doc_ids": json.dumps(list(self.doc_ids)),
            "records": json.dumps([asdict(r) for r in self.records]),
            "drop": json.dumps(list(self.drop)),
            "chunks": self.chunks,
        }

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> Journal:
        return cls(
            write=str(meta["write"]),
            generation=str(meta["generation"]),
            doc_ids=tuple(json.loads(str(meta["doc_ids"]))),
            records=tuple(DocumentRecord(**r) for r in json.loads(str(meta["records"]))),
            drop=tuple(json.loads(str(meta["drop"]))),
            chunks=int(meta["chunks"]),
        )
