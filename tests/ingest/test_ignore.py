"""--exclude and .raglineignore: gitignore rules leave files out of ingest (and the index)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.engine import Ragline
from ragline.ingest.discover import discover
from ragline.ingest.ignore import IGNORE_FILE, IgnoreFileError, rules_for

EXTS = (".md", ".txt")
runner = CliRunner()


def write_site(root: Path) -> Path:
    """A docs folder with the usual noise: release notes, drafts, a vendored folder."""
    for rel, text in {
        "index.md": "# Home\n\nThe lighthouse keeper logs the lamp hours every night.\n",
        "guide/setup.md": "# Setup\n\nInstall the fog horn before the first winter storm.\n",
        "release-notes.md": "# Release notes\n\n## 1.0\n\nThe quartz beacon was new.\n",
        "drafts/idea.md": "# Idea\n\nA draft about painting the tower in stripes.\n",
        "guide/release-notes.md": "# Older notes\n\nThe granite base was poured in 1901.\n",
        "vendor/lib/README.md": "# Vendored\n\nThird-party readme about zinc anodes.\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def names(root: Path, files: list[Path]) -> list[str]:
    return [p.relative_to(root).as_posix() for p in files]


def test_raglineignore_and_exclude_use_gitignore_rules(tmp_path: Path) -> None:
    root = write_site(tmp_path / "site")
    (root / IGNORE_FILE).write_text("# noise\nrelease-notes.md\ndrafts/\n!guide/release-notes.md\n")
    found = discover(root, EXTS, rules_for(root, ["vendor/"]))
    assert names(root, found.files) == ["guide/release-notes.md", "guide/setup.md", "index.md"]
    assert found.excluded == ["drafts/", "release-notes.md", "vendor/"]
    # without rules, everything is found (the pre-existing behaviour)
    assert len(discover(root, EXTS).files) == 6
    # an anchored pattern matches at the top only
    top = discover(root, EXTS, rules_for(tmp_path / "nowhere", ["/release-notes.md"]))
    assert "guide/release-notes.md" in names(root, top.files)
    assert "release-notes.md" not in names(root, top.files)


def test_an_unreadable_ignore_file_is_named(tmp_path: Path) -> None:
    root = write_site(tmp_path / "site")
    (root / IGNORE_FILE).write_bytes(b"drafts/\n\xff\xfe\n")
    with pytest.raises(IgnoreFileError, match=IGNORE_FILE):
        rules_for(root, [])


def test_excluded_files_are_not_indexed_and_leave_the_index(
    tmp_path: Path, make_rag: Callable[..., Ragline]
) -> None:
    root = write_site(tmp_path / "site")
    rag = make_rag()
    first = rag.ingest(root)
    assert first.files == 6 and first.excluded == []
    # the rules added later: the files they name leave the index on the next run
    (root / IGNORE_FILE).write_text("release-notes.md\n")
    rag2 = make_rag(rag.settings.index_dir, exclude=("drafts/", "vendor/"))
    second = rag2.ingest(root)
    assert second.excluded == ["drafts/", "guide/release-notes.md", "release-notes.md", "vendor/"]
    assert sorted(second.deleted) == sorted(
        ["drafts/idea.md", "guide/release-notes.md", "release-notes.md", "vendor/lib/README.md"]
    )
    sources = sorted(d.source for d in rag2.store.documents(None))
    assert sources == [(root / "guide/setup.md").as_posix(), (root / "index.md").as_posix()]


def test_cli_exclude_is_repeatable_and_the_report_counts_it(tmp_path: Path) -> None:
    root = write_site(tmp_path / "site")
    (root / IGNORE_FILE).write_text("vendor/\n")
    idx = tmp_path / "idx"
    args = ["ingest", str(root), "--index", str(idx), "--exclude", "release-notes.md"]
    result = runner.invoke(app, [*args, "--exclude", "drafts/", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["excluded"] == [
        "drafts/",
        "guide/release-notes.md",
        "release-notes.md",
        "vendor/",
    ]
    assert sorted(report["indexed"]) == ["guide/setup.md", "index.md"]
    human = runner.invoke(app, [*args, "--exclude", "drafts/"])
    assert human.exit_code == 0, human.output
    assert "excluded (ignore rules)" in human.stdout
    assert "excluded: drafts/, guide/release-notes.md" in " ".join(human.stdout.split())
