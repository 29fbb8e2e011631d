"""Ingest hygiene: skipped heading levels are warned about (file and line), and a bad
embedding (NaN, wrong shape, too slow) fails only the file behind it: the batch is
split until the bad input is alone."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragline.embed.base import Embedder, ModelFingerprint, Vectors
from ragline.engine import Ragline
from ragline.ingest.hygiene import skipped_heading_levels
from ragline.ingest.parse.markdown import parse_markdown
from ragline.settings import Settings

SKIPPING = "# Guide\n\nIntro.\n\n## Setup\n\nSteps.\n\n#### Details\n\nMore.\n\n## Use\n\nText.\n"


def test_skipped_heading_level_is_found_with_its_line() -> None:
    doc = parse_markdown(SKIPPING, "guide.md")
    found = skipped_heading_levels(doc.blocks)
    assert len(found) == 1
    line, message = found[0]
    assert line == 9 and "H2 → H4" in message and "Details" in message
    assert skipped_heading_levels(parse_markdown("## A\n\n### B\n\n# C\n\nx\n", "x").blocks) == []


class Faulty:
    """The real embedder, with faults injected for texts holding a marker."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.calls: list[int] = []

    @property
    def fingerprint(self) -> ModelFingerprint:
        return self.inner.fingerprint

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        vecs = self.inner.embed_documents(texts)
        if any("SLOWPOKE" in t for t in texts):
            time.sleep(2.0)
        for row, text in enumerate(texts):
            if "POISONED" in text:
                vecs[row] = np.nan
        if any("HALFWIDTH" in t for t in texts):
            return vecs[:, : self.dimension // 2]
        return vecs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def corpus(root: Path, bad: dict[str, str]) -> Path:
    root.mkdir()
    for i in range(4):
        (root / f"good{i}.md").write_text(f"# Good {i}\n\nZebras graze on grass number {i}.\n")
    for name, marker in bad.items():
        (root / name).write_text(f"# Bad\n\nThis one is {marker} on purpose.\n")
    return root


def test_nan_and_shape_fail_only_their_file(embedder: Embedder, tmp_path: Path) -> None:
    faulty = Faulty(embedder)
    root = corpus(tmp_path / "c", {"nan.md": "POISONED"})
    rag = Ragline(Settings(index_dir=tmp_path / "i"), embedder=faulty)  # type: ignore[arg-type]
    try:
        report = rag.ingest(root)
        assert [(f.path, "NaN" in f.reason) for f in report.failed] == [("nan.md", True)]
        assert sorted(report.indexed) == [f"good{i}.md" for i in range(4)]
        (root / "nan.md").unlink()
        (root / "wide.md").write_text("# Wide\n\nThis one is HALFWIDTH on purpose.\n")
        report = rag.ingest(root)
        assert [f.path for f in report.failed] == ["wide.md"]
        assert "shape" in report.failed[0].reason
        hits = rag.search("zebras graze", mode="vector").hits
        assert hits and all(np.isfinite(h.score) for h in hits)
    finally:
        rag.close()


def test_slow_embedding_times_out_alone(embedder: Embedder, tmp_path: Path) -> None:
    faulty = Faulty(embedder)
    root = corpus(tmp_path / "c", {"slow.md": "SLOWPOKE"})
    settings = Settings(index_dir=tmp_path / "i", embed_timeout_per_100_s=0.5)
    rag = Ragline(settings, embedder=faulty)  # type: ignore[arg-type]
    try:
        report = rag.ingest(root)
    finally:
        rag.close()
    assert [f.path for f in report.failed] == ["slow.md"]
    assert "RAGLINE_EMBED_TIMEOUT_PER_100_S" in report.failed[0].reason
    assert len(report.indexed) == 4


def test_skipped_heading_is_a_report_warning(embedder: Embedder, tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "guide.md").write_text(SKIPPING)
    rag = Ragline(Settings(index_dir=tmp_path / "i"), embedder=embedder)
    try:
        report = rag.ingest(root)
    finally:
        rag.close()
    assert report.indexed == ["guide.md"] and not report.failed
    assert [(w.path, w.line) for w in report.warnings] == [("guide.md", 9)]
    assert report.to_dict()["warnings"][0]["reason"].startswith("heading level skipped")


def test_missing_metadata_gets_the_seed_defaults_and_a_warning(
    embedder: Embedder, tmp_path: Path
) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "empty.md").write_text(
        "# Guide\n\nIntro text.\n\n## \n\nText under a heading with no words.\n"
    )
    rag = Ragline(Settings(index_dir=tmp_path / "i"), embedder=embedder)
    try:
        report = rag.ingest(root)
        sections = {h.chunk.section for h in rag.search("heading with no words", top_k=5).hits}
    finally:
        rag.close()
    assert report.indexed == ["empty.md"]
    assert [(w.path, w.line) for w in report.warnings] == [("empty.md", 5)]
    assert "N/A" in report.warnings[0].reason
    assert "N/A" in sections
