"""The search cache: the rows of one chunks-table version as an Arrow file, so that a
new process can build its in-process mirror without importing LanceDB.

Why: ``import lancedb`` costs about 1 CPU-s (2.8 s wall on a loaded 2-core machine,
``python -X importtime``), most of a cold ``ragline search`` on a small index (issue
26). The writer (``LanceStore.optimize`` and ``rebuild``, the end of every ingest
that changed something) writes the live version's rows here; a reader whose mirror
is empty checks the cache against the table's latest version, read from the names
in its ``_versions`` folder, and builds its snapshot from the file. A stale or
missing cache only means the reader asks LanceDB, as before.

Pure pyarrow and the file system: this module must never import lancedb.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

#: Folder of the index that holds one cache file per chunks table.
CACHE_DIR = "search-cache"
#: Bumped when the file's layout changes; a file of another format is ignored.
#: 2: the mirror's string columns are stored dictionary-encoded.
CACHE_FORMAT = "2"
_MANIFEST = re.compile(r"^(\d+)\.manifest$")
#: Lance's V2 manifest names are ``u64::MAX - version``, zero-padded to 20 digits.
_U64_MAX = 2**64 - 1
_V2_DIGITS = 20


def latest_version(versions_dir: Path) -> int | None:
    """The newest committed version of a Lance table, from its manifest names
    (``{version}.manifest``, or V2's ``{u64::MAX - version:020}.manifest``); None
    when the folder is missing or holds none. A manifest is renamed into place
    whole when its commit succeeds, so a listed name is a committed version."""
    try:
        names = os.listdir(versions_dir)
    except OSError:
        return None
    newest: int | None = None
    for name in names:
        found = _MANIFEST.match(name)
        if found is None:
            continue
        digits = found.group(1)
        number = int(digits)
        version = _U64_MAX - number if len(digits) == _V2_DIGITS else number
        if newest is None or version > newest:
            newest = version
    return newest


def cache_path(index: Path, table: str) -> Path:
    return index / CACHE_DIR / f"{table}.arrow"


@dataclass(frozen=True, slots=True)
class CachedRows:
    """One table version's rows (chunk columns, ``vector``, ``_rowid``)."""

    table: str
    version: int
    rows: pa.Table

    @property
    def dimension(self) -> int:
        vector = self.rows.schema.field("vector").type
        return int(vector.list_size)


def write_rows(
    index: Path, table: str, version: int, rows: pa.Table, encode: Sequence[str] = ()
) -> Path:
    """Write ``rows`` as the cache of ``table`` at ``version``: a temporary file in
    the same folder, then ``os.replace``, so a reader sees the old file or the new
    one, never half of one. The string columns named in ``encode`` are stored
    dictionary-encoded, as the mirror holds them: its reader then needs no
    ``pyarrow.compute`` (≈ 0.1 CPU-s to import)."""
    import pyarrow.compute as pc  # the writer is an ingest: LanceDB loaded it already

    for name in encode:
        at = rows.schema.get_field_index(name)
        if at >= 0 and pa.types.is_string(rows.schema.field(at).type):
            # one dictionary for the whole file (the IPC file format cannot replace one)
            encoded = pc.dictionary_encode(rows.column(at).combine_chunks())
            rows = rows.set_column(at, name, encoded)
    path = cache_path(index, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {b"table": table.encode(), b"version": str(version).encode()}
    meta[b"format"] = CACHE_FORMAT.encode()
    schema = rows.schema.with_metadata(meta)
    fd, tmp = tempfile.mkstemp(prefix=f".{table}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out, ipc.new_file(out, schema) as writer:
            writer.write_table(rows.replace_schema_metadata(meta))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def read_rows(
    index: Path, table: str, version: int, columns: Sequence[str] = ()
) -> CachedRows | None:
    """The cached rows of ``table`` at exactly ``version``, with ``columns`` among
    them; None when there is no cache, it holds another version, format or other
    columns, or it cannot be read (the caller then reads LanceDB)."""
    path = cache_path(index, table)
    try:
        with pa.OSFile(str(path), "rb") as source:  # read whole: the mirror copies it anyway
            reader = ipc.open_file(source)
            meta = reader.schema.metadata or {}
            if (
                meta.get(b"format") != CACHE_FORMAT.encode()
                or meta.get(b"table") != table.encode()
                or meta.get(b"version") != str(version).encode()
            ):
                return None
            rows = reader.read_all()
    except Exception:  # a damaged or foreign file is a cache miss, never a failed search
        return None
    if not {*columns, "vector", "_rowid"} <= set(rows.column_names):
        return None
    return CachedRows(table, version, rows.replace_schema_metadata(None))


def drop_stale(index: Path, keep: str) -> None:
    """Remove the cache files of tables other than ``keep`` (a rebuild's old table)."""
    folder = index / CACHE_DIR
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.suffix == ".arrow" and entry.stem != keep:
                with contextlib.suppress(OSError):
                    entry.unlink()
