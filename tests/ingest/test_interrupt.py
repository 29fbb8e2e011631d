"""Ctrl-C during `ragline ingest`: the run stops within seconds, says what it kept
and how to resume, and keeps every file whose chunks were embedded; the next run
embeds only the rest and ends with the index a clean run builds (issue 26: exit
130 after 29–39 s, silent, and up to 512 embedded chunks thrown away)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ragline.engine import Ragline
from ragline.store.lance import LanceStore

from .test_crash import make_corpus, snapshot

EMBEDDED = re.compile(r"chunks embedded ([\d,]+) /")
KEPT = re.compile(
    r"interrupted: kept ([\d,]+) files \(([\d,]+) chunks\); run `ragline ingest (.+)` again"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_ctrl_c_keeps_embedded_files_and_rerun_embeds_the_rest(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    make_corpus(corpus)
    index = tmp_path / "stopped"
    env = {
        **os.environ,
        "RAGLINE_INDEX_DIR": str(index),
        "RAGLINE_EMBED_THREADS": "1",
        "RAGLINE_INGEST_EMBED_CALL_CHUNKS": "16",
        "COLUMNS": "200",
    }
    # stderr on a terminal, as for a person at one: the progress line shows there
    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragline", "ingest", str(corpus)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=sub,
        text=True,
    )
    os.close(sub)
    shown = ""
    try:
        deadline = time.monotonic() + 300
        # once a few calls are embedded, more than one file's chunks are complete
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                shown += os.read(main, 65536).decode(errors="replace")
            counts = [_number(n) for n in EMBEDDED.findall(shown)]
            if counts and max(counts) >= 48:
                break
        assert proc.poll() is None, f"ingest ended before Ctrl-C:\n{shown[-2000:]}"
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, _ = proc.communicate(timeout=60)
        stopped_after = time.monotonic() - sent
        while select.select([main], [], [], 0.2)[0]:
            try:
                shown += os.read(main, 65536).decode(errors="replace")
            except OSError:
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)
    assert proc.returncode == 130, shown[-2000:]
    # a bound far above the 2 s it takes, far below the 29–39 s it took
    assert stopped_after < 15, stopped_after
    flat = " ".join(shown.split())
    assert "stopping: writing the files already embedded" in flat
    kept = KEPT.search(flat)
    assert kept is not None, flat[-2000:]
    kept_files, kept_chunks = _number(kept.group(1)), _number(kept.group(2))
    assert kept.group(3) == str(corpus)
    assert kept_files > 0 and kept_chunks > 0
    assert "ingest" in out  # the report of what was done is printed

    # the index holds exactly the kept files, complete
    store = LanceStore(index / "lance", dimension=384)
    assert len(store.documents()) == kept_files
    assert store.info(None).chunks == kept_chunks
    store.close()

    resumed = make_rag(index=index).ingest(corpus)
    reference = make_rag(index=tmp_path / "reference").ingest(corpus)
    assert resumed.failed == [] and not resumed.interrupted
    assert len(resumed.skipped) == kept_files  # not parsed or embedded again
    assert resumed.chunks_embedded == reference.chunks - kept_chunks
    got = snapshot(make_rag(index=index).store)  # type: ignore[arg-type]
    want = snapshot(make_rag(index=tmp_path / "reference").store)  # type: ignore[arg-type]
    assert len({cid for _, cid, _ in got}) == len(got)  # no duplicates
    assert got == want  # nothing lost, nothing extra
