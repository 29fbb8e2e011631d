"""kill -9 during an ingest, then a resync: exactly the chunks of a clean ingest.

Runs the real Indexer (real embedding model) in a child process against a real
Chroma server, Chroma's local mode and a real FalkorDB server, kills it with
SIGKILL in the middle of the sync, syncs again in this process and compares the
stored chunks with those of a clean ingest of the same folder into a fresh store.
For FalkorDB the server itself is also killed mid-write and restarted from its
append-only file.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline.embed.base import Embedder
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import make_chunker
from ragline.ingest.sync import Indexer
from ragline.settings import Settings
from ragline.store.base import Store
from ragline.store.factory import open_store, store_location
from ragline.store.reads import keyword_search

_SERVERS = Path(__file__).resolve().parents[1] / "servers.py"

_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from ragline.embed.factory import make_embedder
    from ragline.embed.tokenizer import TokenCounter
    from ragline.engine import make_chunker
    from ragline.ingest.sync import Indexer
    from ragline.settings import Settings
    from ragline.store.factory import make_store

    settings = Settings(index_dir=Path(sys.argv[2]), store_url=sys.argv[3])
    embedder = make_embedder(settings)
    store = make_store(settings, embedder.fingerprint.dimension)
    indexer = Indexer(store, embedder, settings, make_chunker(settings, TokenCounter()))
    handled = [0]

    def tell(event):  # one line per handled file, not per embedded batch
        if event.files_done > handled[0]:
            handled[0] = event.files_done
            print(event.current, flush=True)

    indexer.sync(Path(sys.argv[1]), progress=tell)
    print("DONE", flush=True)
    """
)

TOPICS = ["gradient", "attention", "convolution", "dropout", "momentum", "entropy"]


def _corpus(root: Path, files: int = 36) -> Path:
    for i in range(files):
        topic = TOPICS[i % len(TOPICS)]
        parts = [f"# Notes on {topic} {i}\n"]
        for s in range(4):
            parts.append(f"\n## Part {s}\n\n")
            parts.append(
                " ".join(
                    f"Sentence {n} of part {s} in file {i} explains {topic} and its uses."
                    for n in range(12)
                )
                + "\n"
            )
        (root / f"f{i:02d}.md").write_text("".join(parts))
    return root


def _snapshot(store: Store) -> list[tuple[str, str, str]]:
    return sorted(
        (c.id, c.content_hash, c.text) for batch, _ in store.iter_chunks(256) for c in batch
    )


def _servers() -> Any:
    """tests/servers.py (the same module object tests/store/conftest.py loads)."""
    name = "ragline_test_servers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _SERVERS)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _sync(url: str, index_dir: Path, docs: Path, embedder: Embedder) -> Store:
    settings = Settings(index_dir=index_dir, store_url=url)
    store = open_store(store_location(settings), settings, embedder.fingerprint.dimension)
    Indexer(store, embedder, settings, make_chunker(settings, TokenCounter())).sync(docs)
    return store


def _run_and_kill(
    tmp_path: Path,
    docs: Path,
    url: str,
    after_files: int,
    kill: Callable[[subprocess.Popen[str]], None],
) -> None:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(docs), str(tmp_path / "idx"), url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    seen = 0
    try:
        while seen < after_files:
            line = proc.stdout.readline()
            if not line or line.startswith("DONE"):
                break
            seen += 1
    finally:
        kill(proc)
        proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert seen >= after_files, stderr[-3000:]


def _sigkill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["chroma", "chroma_local", "falkordb"])
def test_kill_during_ingest_then_resync_equals_a_clean_ingest(
    kind: str, tmp_path: Path, embedder: Embedder, request: pytest.FixtureRequest
) -> None:
    docs = _corpus(_mk(tmp_path))
    if kind == "chroma":
        base = str(request.getfixturevalue("chroma_url")).replace("http://", "chroma://")
        url, clean_url = f"{base}/crashed", f"{base}/clean"
    elif kind == "chroma_local":
        url = f"chroma+local://{tmp_path / 'chroma'}"
        clean_url = f"chroma+local://{tmp_path / 'chroma-clean'}"
    else:
        base = str(request.getfixturevalue("falkordb_url"))
        url, clean_url = f"{base}/crashed", f"{base}/clean"

    _run_and_kill(tmp_path, docs, url, after_files=12, kill=_sigkill)
    store = _sync(url, tmp_path / "idx", docs, embedder)
    clean = _sync(clean_url, tmp_path / "idx-clean", docs, embedder)
    try:
        got, want = _snapshot(store), _snapshot(clean)
        assert len(got) == len(want) > 36
        assert got == want
        assert sorted(r.source for r in store.documents()) == sorted(
            r.source for r in clean.documents()
        )
        store.optimize()
        clean.optimize()
        for query in TOPICS:
            assert keyword_search(store, query, 50) and [
                (h.chunk.id, round(h.keyword_score or 0, 4))
                for h in keyword_search(store, query, 50)
            ] == [
                (h.chunk.id, round(h.keyword_score or 0, 4))
                for h in keyword_search(clean, query, 50)
            ]
    finally:
        store.close()
        clean.close()


def _mk(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    return docs


@pytest.mark.slow
def test_falkordb_server_killed_mid_ingest_keeps_whole_writes(
    tmp_path: Path, embedder: Embedder
) -> None:
    """SIGKILL the server (not the writer) during a sync; after a restart from its
    append-only file every document is whole, and a resync completes exactly."""
    docs = _corpus(_mk(tmp_path))
    server = _servers().start_falkordb(tmp_path / "falkordb")
    url = f"{server.url()}/kg"
    try:
        _run_and_kill(tmp_path, docs, url, after_files=12, kill=lambda proc: server.kill())
        server = server.restart()
        store = _sync(url, tmp_path / "idx", docs, embedder)
        clean = _sync(f"{server.url()}/clean", tmp_path / "idx-clean", docs, embedder)
        try:
            assert _snapshot(store) == _snapshot(clean)
            assert store.info().chunks == clean.info().chunks > 36
        finally:
            store.close()
            clean.close()
    finally:
        server.stop()
