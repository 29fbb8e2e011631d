"""The sync plan, decided from hashes alone (pure: no store, no model)."""

from __future__ import annotations

from pathlib import Path

from ragline.ingest.plan import FileState, in_scope, plan_sync
from ragline.types import DocumentRecord


def _rec(source: str, h: str) -> DocumentRecord:
    return DocumentRecord("id", "t", source, h, 1, 1, "", "", "markdown", "")


def test_plan_sync_is_decided_by_hashes() -> None:
    files = [
        FileState(Path("/r/a.md"), "/r/a.md", 1, "h1"),
        FileState(Path("/r/b.md"), "/r/b.md", 1, "h2-new"),
        FileState(Path("/r/c.md"), "/r/c.md", 1, "h3"),
    ]
    indexed = {
        "/r/a.md": _rec("/r/a.md", "h1"),
        "/r/b.md": _rec("/r/b.md", "h2"),
        "/r/d.md": _rec("/r/d.md", "h4"),
    }
    plan = plan_sync(files, indexed)
    assert [f.source for f in plan.unchanged] == ["/r/a.md"]
    assert [f.source for f in plan.to_index] == ["/r/b.md", "/r/c.md"]
    assert [r.source for r in plan.to_delete] == ["/r/d.md"]


def test_in_scope_matches_whole_path_segments() -> None:
    assert in_scope("/data/docs/a.md", Path("/data/docs"))
    assert not in_scope("/data/docs-old/a.md", Path("/data/docs"))
    assert in_scope("/data/docs/a.md", Path("/data/docs/a.md"))
