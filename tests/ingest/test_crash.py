"""`kill -9` during an ingest: the index stays usable and the next run completes it exactly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ragline.engine import Ragline
from ragline.store.lance import LanceStore

TOPICS = [
    "glaciers",
    "volcanoes",
    "tides",
    "deserts",
    "rainforests",
    "coral reefs",
    "tundra",
    "monsoons",
    "canyons",
    "geysers",
]


FILES = 96  # large enough that a loaded machine cannot finish the run between two polls


def make_corpus(root: Path, files: int = FILES) -> None:
    for i in range(files):
        topic = TOPICS[i % len(TOPICS)]
        sections = "\n\n".join(
            f"## Part {j} of note {i}\n\n"
            + " ".join(
                f"Observation {i}.{j}.{k} about {topic} and field site {i * 7 + k}."
                for k in range(12)
            )
            for j in range(4)
        )
        (root / f"note-{i:03d}.md").write_text(f"# Note {i} on {topic}\n\n{sections}\n")


def snapshot(store: LanceStore) -> list[tuple[str, str, int]]:
    rows = [(c.doc_id, c.id, c.chunk_index) for batch, _ in store.iter_chunks(256) for c in batch]
    return sorted(rows)


def test_kill_mid_ingest_then_rerun_completes_exactly(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_corpus(corpus)
    index = tmp_path / "killed"
    env = {
        **os.environ,
        "RAGLINE_WRITE_BATCH_CHUNKS": "8",
        "RAGLINE_EMBED_THREADS": "1",
        "RAGLINE_INDEX_DIR": str(index),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragline", "ingest", str(corpus)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    reader = None
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            if reader is None and (index / "lance").exists():
                try:
                    reader = LanceStore(index / "lance", dimension=384)
                except Exception:
                    continue
            # once a first document is recorded: then the killed run has finished
            # part of the corpus, which the rerun must not redo
            if reader is not None and reader.documents():
                break
        assert proc.poll() is None, "ingest ended before it could be killed"
        assert reader is not None and reader.documents(), "no document recorded within 240 s"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    # the killed index is usable and holds part of the corpus
    partial = make_rag(index=index)
    written = partial.store.info(None).chunks
    assert written > 0
    assert partial.search("observation about glaciers").hits

    report = partial.ingest(corpus)
    assert report.failed == []
    assert 0 < len(report.indexed) < FILES  # only what the killed run had not recorded

    reference = make_rag(index=tmp_path / "reference")
    reference.ingest(corpus)
    got, want = snapshot(partial.store), snapshot(reference.store)  # type: ignore[arg-type]
    assert len({cid for _, cid, _ in got}) == len(got)  # no duplicates
    assert got == want  # nothing lost, nothing extra
    assert len(partial.store.documents()) == FILES
