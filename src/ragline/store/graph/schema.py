"""What the graph store writes: node properties, BM25 postings and the store state.

Pure functions from ragline's types to the parameters of the statements in
:mod:`ragline.store.graph.cypher`, and back.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragline.embed.base import ModelFingerprint
from ragline.store.base import CHUNK_COLUMNS, chunk_from_row
from ragline.store.graph.filters import front_matter_properties
from ragline.store.remote import check_format, flat_chunk
from ragline.text import bm25
from ragline.types import Chunk, DocumentRecord

FORMAT_VERSION = 1


def term_key(field: int, term: str) -> str:
    """A Term node's key: the BM25 field number and the analysed term."""
    return f"{field}:{term}"


def chunk_row(chunk: Chunk, vector: Sequence[float]) -> dict[str, Any]:
    """``CHUNKS_ADD`` parameters of one chunk: properties (nulls left out: a graph
    property cannot be null), the vector and its postings ``[[term key, tf]]``."""
    props = flat_chunk(chunk, CHUNK_COLUMNS, list)
    props.update(front_matter_properties(chunk.metadata))  # what metadata filters read
    terms = bm25.chunk_terms(chunk)
    props["headings"] = bm25.chunk_fields(chunk)["headings"]
    postings: list[list[Any]] = []
    for f, name in enumerate(bm25.KEYWORD_FIELDS):
        props[f"len{f}"] = terms[name].length
        postings += [[term_key(f, t), tf] for t, tf in sorted(terms[name].tf.items())]
    return {"props": props, "v": [float(x) for x in vector], "terms": postings}


def term_counts(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``DF_ADD`` parameters: how many of the new chunks hold each term key."""
    counts: Counter[str] = Counter(p[0] for r in rows for p in r["terms"])
    return [{"k": k, "n": n} for k, n in sorted(counts.items())]


def stats_delta(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """``STATS_ADD`` parameters: per field, new chunks with a token and their length."""
    n = [0, 0, 0]
    t = [0, 0, 0]
    for r in rows:
        for f in range(3):
            length = int(r["props"][f"len{f}"])
            if length:
                n[f] += 1
                t[f] += length
    return {"n": n, "t": t}


def next_pairs(chunks: Sequence[Chunk]) -> list[list[str]]:
    """``NEXT_LINK`` parameters: consecutive chunks of each document, in order."""
    by_doc: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    pairs = []
    for doc_chunks in by_doc.values():
        ordered = sorted(doc_chunks, key=lambda c: c.chunk_index)
        pairs += [[a.id, b.id] for a, b in itertools.pairwise(ordered)]
    return pairs


def document_props(record: DocumentRecord) -> dict[str, Any]:
    return asdict(record)


def row_chunk(row: Sequence[Any]) -> Chunk:
    """A Chunk from the columns of ``cypher.CHUNK_RETURN`` (absent properties are null)."""
    return chunk_from_row(list(row[: len(CHUNK_COLUMNS)]))


@dataclass(frozen=True, slots=True)
class GraphState:
    """The store's state, kept in one Redis key beside the graphs: the live graph
    (a rebuild fills another and swaps this pointer), its vector size and model."""

    graph: str
    number: int
    dimension: int
    fingerprint: ModelFingerprint | None

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT_VERSION,
                "graph": self.graph,
                "number": self.number,
                "dimension": self.dimension,
                "fingerprint": self.fingerprint.to_dict() if self.fingerprint else None,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> GraphState:
        d = json.loads(text)
        check_format("graph", d.get("format"), FORMAT_VERSION)
        fp = d.get("fingerprint")
        return cls(
            graph=str(d["graph"]),
            number=int(d["number"]),
            dimension=int(d["dimension"]),
            fingerprint=ModelFingerprint.from_dict(fp) if fp else None,
        )
