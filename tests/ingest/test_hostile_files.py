"""Files built to hurt: a YAML alias bomb, oversized front matter, a FIFO and a
symlink loop named .md, a file that cannot be read given directly, and a file
that failed once (not parsed again until it changes)."""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.engine import Ragline
from ragline.ingest.errors import IngestError
from ragline.ingest.parse import parse_file

GOOD = "# Giraffe\n\nGiraffes have long necks and eat acacia leaves.\n"


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """~350 bytes of YAML that expand to width**levels strings when aliases are followed."""
    lines = ["---", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        refs = ",".join(f"*a{i - 1}" for _ in range(width))
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join([*lines, "---", "", "# Bomb", "", "Boom."]) + "\n"


def test_alias_bomb_fails_fast_and_small() -> None:
    data = alias_bomb().encode()
    assert len(data) < 600
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(IngestError) as err:
        parse_file(Path("bomb.md"), data, max_bytes=1 << 20)
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert seconds < 1.0 and peak < 100 * 1024 * 1024
    assert "aliases" in err.value.reason and err.value.line == 3  # the first *a0


def test_bomb_and_big_front_matter_fail_alone(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "bomb.md").write_text(alias_bomb())
    big = "---\nnotes: " + "x" * 2000 + "\n---\n\n# Big\n\nA body.\n"
    (corpus / "big.md").write_text(big)
    (corpus / "giraffe.md").write_text(GOOD)
    rag = make_rag(max_metadata_bytes=1024)
    started = time.perf_counter()
    report = rag.ingest(corpus)
    assert time.perf_counter() - started < 30
    failed = {f.path: f.reason for f in report.failed}
    assert set(failed) == {"bomb.md", "big.md"}
    assert "aliases" in failed["bomb.md"]
    assert "RAGLINE_MAX_METADATA_BYTES" in failed["big.md"]
    assert report.indexed == ["giraffe.md"]


def test_fifo_and_symlink_loop_get_a_line(make_rag: Callable[..., Ragline], tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "giraffe.md").write_text(GOOD)
    os.mkfifo(corpus / "pipe.md")
    (corpus / "a.md").symlink_to(corpus / "b.md")
    (corpus / "b.md").symlink_to(corpus / "a.md")
    (corpus / "gone.md").symlink_to(corpus / "missing.md")
    report = make_rag().ingest(corpus)  # never blocks on the FIFO
    failed = {f.path: f.reason for f in report.failed}
    assert "FIFO" in failed["pipe.md"]
    assert failed["a.md"] == failed["b.md"] == "symbolic link loop"
    assert failed["gone.md"] == "broken symbolic link"
    assert report.indexed == ["giraffe.md"] and report.files == 5


def test_unreadable_file_given_directly_is_a_failed_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.md"
    loop.symlink_to(loop)
    for path in (fifo, loop):
        result = CliRunner().invoke(
            app, ["ingest", str(path), "--index", str(tmp_path / "idx"), "--json"]
        )
        assert result.exit_code == 1, result.output  # a failed file, not a usage error (2)
        assert path.name in result.output
    missing = CliRunner().invoke(app, ["ingest", str(tmp_path / "nope.md")])
    assert missing.exit_code == 2


def test_failed_file_is_not_parsed_again_until_it_changes(
    make_rag: Callable[..., Ragline], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "bomb.md").write_text(alias_bomb())
    (corpus / "giraffe.md").write_text(GOOD)
    rag = make_rag()
    first = rag.ingest(corpus)
    assert [f.path for f in first.failed] == ["bomb.md"]

    import ragline.ingest.prepare as prepare

    parsed: list[str] = []
    real = prepare.parse_file

    def counting(path: Path, *args: object, **kwargs: object) -> object:
        parsed.append(path.name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(prepare, "parse_file", counting)
    again = rag.ingest(corpus)
    assert parsed == [] and [f.path for f in again.failed] == ["bomb.md"]
    assert again.failed[0].reason == first.failed[0].reason

    (corpus / "bomb.md").write_text("# Fixed\n\nNo more aliases here.\n")
    fixed = rag.ingest(corpus)
    assert parsed == ["bomb.md"] and not fixed.failed and fixed.indexed == ["bomb.md"]


def test_a_failure_of_this_machine_is_tried_again(
    make_rag: Callable[..., Ragline], tmp_path: Path, gen: ModuleType
) -> None:
    """A scan that failed because Tesseract could not be found is not remembered:
    once OCR can run, the next ingest reads it (its content never changed)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    gen.write_scanned_pdf(corpus / "scan.pdf")
    index = tmp_path / "index"
    without = make_rag(index, ocr_command=str(tmp_path / "bin" / "tesseract"))
    first = without.ingest(corpus)
    assert [f.path for f in first.failed] == ["scan.pdf"]
    assert "Tesseract OCR is not installed" in first.failed[0].reason
    without.close()
    fixed = make_rag(index).ingest(corpus)
    assert not fixed.failed and fixed.indexed == ["scan.pdf"]
