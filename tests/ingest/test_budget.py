"""One file whose parse runs too long or takes too much memory fails alone: it is
stopped (its worker killed), reported with the setting that raises the limit, the
files beside it are indexed, and what was stored for it before stays."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ragline.engine import Ragline

GIRAFFE = "# Giraffe\n\nGiraffes eat acacia leaves high in the savanna trees.\n"


def test_a_file_over_the_time_budget_is_stopped_and_fails_alone(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "giraffe.md").write_text(GIRAFFE)
    many = corpus / "headings.md"
    many.write_text("# Lighthouse\n\nThe keeper lit the lamp at dusk every evening.\n")
    # the line limit is raised so that only the budget stands between us and the parse
    rag = make_rag(
        ingest_file_timeout_s=1.0, ingest_budget_min_bytes=1024, max_markdown_lines=10**7
    )
    first = rag.ingest(corpus)
    assert sorted(first.indexed) == ["giraffe.md", "headings.md"]
    before = rag.store.info().chunks
    # a million one-line headings: minutes of parsing on an unbounded run
    many.write_text("".join(f"# Heading {i}\n" for i in range(1_000_000)))
    started = time.monotonic()
    report = rag.ingest(corpus)
    elapsed = time.monotonic() - started
    failed = {f.path: f.reason for f in report.failed}
    assert list(failed) == ["headings.md"]
    assert "longer than 1 s" in failed["headings.md"]
    assert "RAGLINE_INGEST_FILE_TIMEOUT_S" in failed["headings.md"]
    assert elapsed < 60  # stopped, not parsed to the end (which takes minutes)
    assert rag.store.info().chunks == before  # the old chunks of headings.md stay
    hits = rag.search("keeper lit the lamp at dusk", top_k=3).hits
    assert hits and hits[0].chunk.source.endswith("headings.md")
    # the next file after a killed worker is parsed as usual
    (corpus / "zebra.md").write_text("# Zebra\n\nZebras graze on short grass.\n" * 200)
    again = rag.ingest(corpus)
    assert "zebra.md" in again.indexed, (again.failed, again.skipped)
    assert [f.path for f in again.failed] == ["headings.md"]


def test_a_file_over_the_memory_budget_fails_alone(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "giraffe.md").write_text(GIRAFFE)
    # a 4 MB CSV grows to hundreds of MB as cells, rows and table blocks
    rows = "".join(f"{i},alpha {i},beta {i},gamma {i},delta {i}\n" for i in range(120_000))
    (corpus / "big.csv").write_text("id,a,b,c,d\n" + rows)
    rag = make_rag(
        ingest_file_memory_mb=64,
        ingest_file_timeout_s=0,
        ingest_budget_min_bytes=1024,
        max_sheet_cells=10**8,
    )
    report = rag.ingest(corpus)
    failed = {f.path: f.reason for f in report.failed}
    assert list(failed) == ["big.csv"]
    assert "memory limit of 64 MiB" in failed["big.csv"]
    assert "RAGLINE_INGEST_FILE_MEMORY_MB" in failed["big.csv"]
    assert report.indexed == ["giraffe.md"]
    hits = rag.search("acacia leaves", top_k=3).hits
    assert hits and hits[0].chunk.source.endswith("giraffe.md")


def test_the_worker_does_not_rerun_a_callers_script_without_a_main_guard(
    tmp_path: Path,
) -> None:
    """A user's script that ingests at top level (no ``if __name__ == "__main__"``)
    runs once: multiprocessing's spawn and forkserver children import the main
    script again, which ran the script's work twice or failed every budgeted file."""
    import subprocess
    import sys

    doc = tmp_path / "big.md"
    doc.write_text("# Giraffes\n\n" + "Giraffes eat acacia leaves. " * 3000)
    script = tmp_path / "user_script.py"
    script.write_text(
        "from pathlib import Path\n"
        "from ragline.ingest.budget import Budget, run_budgeted\n"
        "from ragline.ingest.parse import parse_file\n"
        "print('script body ran', flush=True)\n"
        f"path = Path({str(doc)!r})\n"
        "data = path.read_bytes()\n"
        "doc = run_budgeted(\n"
        "    parse_file, str(path), len(data), Budget(60.0, 0, 0), path, data, max_bytes=10**8\n"
        ")\n"
        "print('parsed', doc.title, flush=True)\n"
    )
    import os

    import ragline

    # the package this test imports, wherever it comes from (an install or src/)
    env = {**os.environ, "PYTHONPATH": str(Path(ragline.__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("script body ran") == 1, done.stdout
    assert "parsed Giraffes" in done.stdout
