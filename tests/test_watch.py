"""`ragline watch`: a real file system, a real index, the real model.

The edit-to-searchable latency is measured (printed with ``-s``); the issue's
figure is 2 s, the assertion's bound is generous for a loaded 2-core machine.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from watchfiles import Change

from ragline.engine import Ragline
from ragline.watch import ChangeCount, SyncEvent, count, relevant, watch_folder

REPO = Path(__file__).resolve().parents[2]
EXTS = (".md", ".txt")
#: The issue asks for 2 s; the test allows 5x for a loaded CI machine and prints the figure.
BOUND_S = 10.0


def test_relevant_events() -> None:
    root, index = Path("/r"), Path("/r/.ragline")
    assert relevant(Change.modified, "/r/a/b.md", root, EXTS, index)
    assert not relevant(Change.modified, "/r/a/b.png", root, EXTS, index)
    assert not relevant(Change.added, "/r/.git/x.md", root, EXTS, index)
    # the root's .raglineignore changes what is indexed: it triggers a sync
    assert relevant(Change.modified, "/r/.raglineignore", root, EXTS, index)
    assert not relevant(Change.modified, "/r/a/.raglineignore", root, EXTS, index)
    assert not relevant(Change.modified, "/r/.ragline/chunks.lance/x.txt", root, EXTS, index)
    assert not relevant(Change.added, "/elsewhere/x.md", root, EXTS, index)
    assert relevant(Change.deleted, "/r/old-folder", root, EXTS, index)
    assert str(count([(Change.added, "a"), (Change.deleted, "b"), (Change.deleted, "c")])) == (
        "+1 ~0 -2"
    )


class Watching:
    def __init__(self, rag: Ragline, root: Path) -> None:
        self.rag = rag
        self.events: list[SyncEvent] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=watch_folder,
            args=(rag, root),
            kwargs={"on_sync": self.events.append, "stop": self.stop},
            daemon=True,
        )

    def wait_for(self, n: int, timeout: float = 60) -> SyncEvent:
        deadline = time.monotonic() + timeout
        while len(self.events) < n:
            assert time.monotonic() < deadline, f"only {len(self.events)} syncs"
            time.sleep(0.01)
        return self.events[n - 1]


@pytest.fixture
def watching(make_rag: Callable[..., Ragline], tmp_path: Path) -> Iterator[tuple[Watching, Path]]:
    root = tmp_path / "notes"
    (root / "birds").mkdir(parents=True)
    (root / "birds" / "puffin.md").write_text(
        "# Puffins\n\nPuffins nest in burrows on cliff tops and eat sand eels.\n"
    )
    (root / "kettle.txt").write_text("Descale the kettle monthly with citric acid.\n")
    rag = make_rag(index=tmp_path / "index")
    w = Watching(rag, root)
    w.thread.start()
    first = w.wait_for(1)
    assert first.report is not None and first.report.indexed == ["birds/puffin.md", "kettle.txt"]
    rag.search("warm up", top_k=1)
    try:
        yield w, root
    finally:
        w.stop.set()
        w.thread.join(timeout=10)
        assert not w.thread.is_alive()


def searchable(rag: Ragline, word: str, timeout: float = BOUND_S) -> float:
    """Seconds until a BM25 search for ``word`` finds it (polling every 10 ms)."""
    started = time.perf_counter()
    while True:
        hits = rag.search(word, mode="bm25", top_k=1).hits
        if hits and word in hits[0].chunk.text:
            return time.perf_counter() - started
        assert time.perf_counter() - started < timeout, f"{word!r} not searchable in {timeout} s"
        time.sleep(0.01)


def test_edit_add_and_delete_are_indexed_as_they_happen(
    watching: tuple[Watching, Path],
) -> None:
    w, root = watching
    rag = w.rag
    puffin = root / "birds" / "puffin.md"
    n = len(w.events)
    t0 = time.perf_counter()
    puffin.write_text(puffin.read_text() + "\nA puffin can carry ten quokkaberries at once.\n")
    searchable(rag, "quokkaberries")
    edited = time.perf_counter() - t0  # from the save to the first search that finds it
    edit_event = w.wait_for(n + 1)
    assert edit_event.changes.modified >= 1
    assert edit_event.report is not None and edit_event.report.indexed == ["birds/puffin.md"]
    assert edit_event.report.chunks_embedded == 1

    n = len(w.events)
    t1 = time.perf_counter()
    (root / "birds" / "gannet.md").write_text("# Gannets\n\nGannets dive for zanzibarite fish.\n")
    searchable(rag, "zanzibarite")
    added = time.perf_counter() - t1
    assert w.wait_for(n + 1).changes.added == 1

    docs = {d.source: d for d in rag.store.documents("default")}
    kettle = docs[(root / "kettle.txt").resolve().as_posix()]
    n = len(w.events)
    t2 = time.perf_counter()
    (root / "kettle.txt").unlink()
    while rag.store.chunks_by_index(kettle.doc_id, range(kettle.chunk_count)):
        assert time.perf_counter() - t2 < BOUND_S, "the deleted file's chunks are still indexed"
        time.sleep(0.01)
    deleted = time.perf_counter() - t2
    assert not rag.search("descale citric acid", mode="bm25").hits
    gone = w.wait_for(n + 1)
    assert gone.report is not None and gone.report.deleted == ["kettle.txt"]
    assert kettle.source not in {d.source for d in rag.store.documents("default")}
    for latency in (edited, added, deleted):
        assert latency < BOUND_S
    assert all(e.error == "" for e in w.events)
    print(
        f"\nwatch latency (save -> searchable): edit {edited:.3f} s, add {added:.3f} s, "
        f"delete -> chunks gone {deleted:.3f} s"
    )


def test_ignored_files_cause_no_reindex(watching: tuple[Watching, Path]) -> None:
    w, root = watching
    before = len(w.events)
    (root / "photo.png").write_bytes(b"\x89PNG")
    (root / ".hidden.md").write_text("# secret\n")
    time.sleep(1.0)
    assert len(w.events) == before
    (root / "kettle.txt").write_text("Descale the kettle weekly with vinegar.\n")
    event = w.wait_for(before + 1)
    assert event.changes == ChangeCount(modified=1) or event.changes.modified >= 1


def test_cli_prints_a_status_line_per_reindex_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text("# Alpha\n\nAlpha notes about kites.\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragline", "watch", str(root), "--index", str(tmp_path / "idx")],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        first = lines.get(timeout=120)
        assert "+0 ~0 -0: 1 indexed" in first, first
        (root / "b.md").write_text("# Beta\n\nBeta notes about gliders.\n")
        second = lines.get(timeout=60)
        assert "+1 ~0 -0: 1 indexed, 0 deleted" in second and "2 files" in second, second
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
