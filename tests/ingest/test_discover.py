"""Which files a run reads: a symbolic link may not lead out of the ingested folder."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ragline.engine import Ragline
from ragline.ingest.discover import discover

SECRET = "root:x:0:0:the vault combination is nineteen seventy one\n"
GOOD = "# Giraffe\n\nGiraffes have long necks and eat acacia leaves.\n"


def linked_corpus(tmp_path: Path) -> Path:
    """corpus/ with a real file, a link to it, and links to a file outside."""
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "passwd.txt").write_text(SECRET)
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "giraffe.md").write_text(GOOD)
    (corpus / "sub" / "alias.md").symlink_to(corpus / "giraffe.md")  # inside: followed
    (corpus / "passwd.txt").symlink_to(outside / "passwd.txt")  # absolute, outside
    (corpus / "sub" / "up.txt").symlink_to(Path("../../private/passwd.txt"))  # relative
    return corpus


def test_links_out_of_the_root_are_refused(tmp_path: Path) -> None:
    corpus = linked_corpus(tmp_path)
    found = discover(corpus, [".md", ".txt"])
    assert [p.relative_to(corpus).as_posix() for p in found.files] == [
        "giraffe.md",
        "sub/alias.md",
    ]
    rejected = {p.relative_to(corpus).as_posix(): why for p, why in found.rejected}
    assert set(rejected) == {"passwd.txt", "sub/up.txt"}
    assert all("outside the ingested folder" in why for why in rejected.values())


def test_a_link_out_is_not_searchable_and_is_reported(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = linked_corpus(tmp_path)
    rag = make_rag()
    report = rag.ingest(corpus)
    assert sorted(report.indexed) == ["giraffe.md", "sub/alias.md"]
    failed = {f.path: f.reason for f in report.failed}
    assert set(failed) == {"passwd.txt", "sub/up.txt"}
    assert "outside the ingested folder" in failed["passwd.txt"]
    hits = rag.search("vault combination nineteen seventy one", mode="bm25", top_k=5).hits
    assert all("vault" not in h.chunk.text for h in hits)


def test_names_that_are_not_utf8_are_reported_not_fatal(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    """A file name with a Latin-1 byte crashed every ingest of its folder."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "giraffe.md").write_text(GOOD)
    raw = os.fsencode(corpus)
    with open(os.path.join(raw, b"caf\xe9.md"), "w") as f:
        f.write("# Cafe\n\nCoffee is served hot.\n")
    os.mkdir(os.path.join(raw, b"d\xefr"))
    with open(os.path.join(raw, b"d\xefr", b"inside.md"), "w") as f:
        f.write("# Inside\n\nHidden by its folder name.\n")
    rag = make_rag()
    report = rag.ingest(corpus)
    assert report.indexed == ["giraffe.md"]
    failed = {f.path: f.reason for f in report.failed}
    assert set(failed) == {"caf\\xe9.md", "d\\xefr"}
    assert "not valid UTF-8" in failed["caf\\xe9.md"]
    saved = json.loads((rag.reports_dir / "last-ingest.json").read_text(encoding="utf-8"))
    assert {f["path"] for f in saved["failed"]} == set(failed)
    again = rag.ingest(corpus)  # and again: nothing changed, nothing crashes
    assert again.skipped == ["giraffe.md"] and len(again.failed) == 2
