"""Plumbing the server-backed stores (Qdrant, Chroma, FalkorDB) share.

Each of them keeps a small *state* record on the server (live collection or
graph, dimension, model fingerprint), rereads it under a lock before every
call (``_fresh()``: another process may have written or rebuilt), and turns any
client error into a :class:`StoreError` that names the store and what failed,
never a password or key (the label holds the location only). Those parts, and
the public methods that are the same on all of them, live here once; the
backends keep what is their own: the state record, writes and search.
Imports no backend (the contract "store backends are independent").
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from ragline.embed.base import ModelFingerprint, Vectors
from ragline.store.base import (
    CandidateQuery,
    Candidates,
    ClosesOnExit,
    SideTop,
    StoreError,
    StoreInfo,
    candidates_in_turn,
    check_vectors,
    metadata_json,
    record_or_read,
    takes_new_dimension,
)
from ragline.store.filters import metadata_filter_values
from ragline.types import Chunk, Filters

T = TypeVar("T")


class _State(Protocol):
    """What the shared methods read from a backend's state record (a dataclass, so
    that a changed copy is ``dataclasses.replace``)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def dimension(self) -> int: ...

    @property
    def fingerprint(self) -> ModelFingerprint | None: ...


S = TypeVar("S", bound=_State)


def check_new_store(dimension: int, kind: str, name: str) -> None:
    """ValueError for a store that could not be created: a dimension below one, or a
    collection/graph name other than letters, digits, ``_`` and ``-``."""
    if dimension < 1:
        raise ValueError(f"dimension must be positive, got {dimension}")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"{kind} {name!r}: use letters, digits, '_' and '-'")


@contextlib.contextmanager
def opening(label: str) -> Iterator[None]:
    """Any failure while a store opens, as ``StoreError("<label>: cannot open: …")``
    (a StoreError raised inside passes as it is)."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"{label}: cannot open: {exc}") from exc


def guarded(
    label: str,
    what: str,
    fn: Callable[..., T],
    *args: Any,
    passes: tuple[type[BaseException], ...] = (StoreError,),
    **kwargs: Any,
) -> T:
    """``fn(*args, **kwargs)``; a client error becomes ``StoreError("<label>: <what>
    failed: …")``; the ``passes`` errors (a bad filter's ValueError) go through."""
    try:
        return fn(*args, **kwargs)
    except passes:
        raise
    except Exception as exc:
        raise StoreError(f"{label}: {what} failed: {exc}") from exc


def query_vector(query: Vectors, dimension: int) -> np.ndarray:
    """The query as a flat float32 vector, or StoreError for a wrong size or NaN."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != dimension:
        raise StoreError(
            f"query vector has dimension {q.shape[0]} but the index stores {dimension}"
        )
    if not np.isfinite(q).all():
        raise StoreError("query vector contains NaN or infinite values")
    return q


def check_format(kind: str, found: object, supported: int) -> None:
    """StoreError for a state record written in a format this ragline cannot read."""
    if found != supported:
        raise StoreError(
            f"{kind} store format {found!r} is not supported "
            f"(this ragline reads format {supported})"
        )


def fill(
    batches: Iterable[tuple[list[Chunk], Vectors]],
    dimension: int,
    write: Callable[[list[Chunk], Vectors], object],
    discard: Callable[[], object],
    then: Callable[[], object] | None = None,
) -> int:
    """A rebuild's copy: every non-empty batch (vectors checked) through ``write``,
    then ``then()`` (what else the target needs, e.g. document records); on any
    failure, ``discard()`` the half-filled target and raise. Chunks written."""
    count = 0
    try:
        for chunks, vectors in batches:
            if not chunks:
                continue
            write(chunks, check_vectors(vectors, len(chunks), dimension, "chunks"))
            count += len(chunks)
        if then is not None:
            then()
    except BaseException:
        with contextlib.suppress(Exception):
            discard()
        raise
    return count


def flat_chunk(
    chunk: Chunk, names: Iterable[str], heading_path: Callable[[list[str]], object]
) -> dict[str, Any]:
    """A chunk's ``names`` fields as a flat record without nulls (what Chroma metadata
    and FalkorDB properties can hold): the metadata as JSON text, the heading path
    as ``heading_path`` makes it, and the filterable metadata keys as keys of their own."""
    out: dict[str, Any] = {}
    for name in names:
        value = getattr(chunk, name)
        if name == "heading_path":
            value = heading_path(list(value))
        elif name == "metadata":
            value = metadata_json(value)
        if value is not None:
            out[name] = value
    out.update(metadata_filter_values(chunk.metadata))
    return out


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size`` (one request each)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class StoreFront(ClosesOnExit):
    """The public methods that only delegate, alike on every server-backed store
    (PostgreSQL included); a subclass supplies what they delegate to."""

    _stored_fingerprint: Callable[[], ModelFingerprint | None]
    _record_fingerprint: Callable[[ModelFingerprint], None]
    _count: Callable[[Filters | None], int]
    _cosine_top: SideTop
    _bm25_top: SideTop

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    def fingerprint(self, new: ModelFingerprint | None = None) -> ModelFingerprint | None:
        return record_or_read(new, self._record_fingerprint, self._stored_fingerprint)

    def info(self, filters: Filters | None = None) -> StoreInfo:
        return StoreInfo(self._count(filters), self.dimension)

    def candidates(self, query: CandidateQuery) -> Candidates:
        return candidates_in_turn(self._cosine_top, self._bm25_top, query)


class RemoteStore(StoreFront, Generic[S]):
    """A store whose state record ``S`` lives on the server (Qdrant, Chroma, FalkorDB).

    A subclass sets ``label`` (``"<Server> <location>"``, no secret in it) and
    supplies ``_fresh`` (its state record, reread under ``_lock``), ``_put_state``
    (writes one) and the parts of ``rebuild``: ``_create_next``, ``_fill_batch``,
    ``_drop``.
    """

    label: str
    #: What a rebuild fills and swaps in (error messages).
    _target = "collection"
    #: Errors ``_call`` lets through unchanged.
    _passes: tuple[type[BaseException], ...] = (StoreError,)

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return guarded(self.label, what, fn, *args, passes=self._passes, **kwargs)

    _fresh: Callable[[], S]
    _put_state: Callable[[S], None]
    #: The state of a new, empty collection or graph one number past ``old``, created.
    _create_next: Callable[[S, ModelFingerprint], S]
    #: One batch of a rebuild's chunks written into the new state's collection or graph.
    _fill_batch: Callable[[S, list[Chunk], Vectors], object]
    #: The collection or graph of a state deleted.
    _drop: Callable[[S], object]

    @property
    def dimension(self) -> int:
        return self._fresh().dimension

    def _stored_fingerprint(self) -> ModelFingerprint | None:
        with self._lock:
            return self._fresh().fingerprint

    def _record_fingerprint(self, fingerprint: ModelFingerprint) -> None:
        """The model goes into the state record; one of another dimension is taken
        only by an empty store, through an (empty) rebuild at that dimension."""
        with self._lock:
            state = self._fresh()
            if takes_new_dimension(fingerprint, state.dimension, lambda: self._count(None)):
                self.rebuild(fingerprint, [])
                return
            new = dataclasses.replace(state, fingerprint=fingerprint)
            self._call("recording the model", self._put_state, new)

    def rebuild(
        self,
        fingerprint: ModelFingerprint,
        batches: Iterable[tuple[list[Chunk], Vectors]],
    ) -> int:
        """Fill a new collection or graph, point the state record at it, then drop the
        old one: readers use the old one until the swap, and a failed fill drops the
        new one, leaving the store as it was."""
        with self._lock:
            old = self._fresh()
            new = self._create_next(old, fingerprint)
            count = fill(
                batches,
                new.dimension,
                lambda chunks, vectors: self._fill_batch(new, chunks, vectors),
                lambda: self._drop(new),
                then=lambda: self._fill_rest(new),
            )
            self._call(f"swapping in the rebuilt {self._target}", self._put_state, new)
            with contextlib.suppress(Exception):
                self._drop(old)
            self._rebuilt(count)
            return count

    def _fill_rest(self, new: S) -> None:
        """What a rebuilt collection or graph needs besides the chunks."""

    def _rebuilt(self, count: int) -> None:
        """What follows the swap (``count`` chunks went in)."""

    def close(self) -> None:
        """Once: later calls fail with "closed" (``_fresh``), a second close does nothing."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()

    def _release(self) -> None:
        """What the backend lets go of when the store closes (its client, files)."""
