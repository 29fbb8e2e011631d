"""Incremental sync against a real LanceDB index and the real model."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ragline.embed.base import ModelFingerprint
from ragline.engine import Ragline
from ragline.ingest.progress import IngestProgress
from ragline.store.base import ModelMismatchError

GUIDE = """---
title: Zebra guide
tags: [animals]
---

# Zebra guide

Zebras are African equines with distinctive black-and-white striped coats.

## Feeding

Zebras graze mostly on grasses and spend most of the day eating.

```python
def graze(hours: int) -> int:
    return hours * 2
```

## Migration

Every year the great migration moves zebras and wildebeest across the Serengeti
in search of rain-fed grass.
"""

OCTOPUS = """# Octopus notes

Octopuses have three hearts and blue blood based on hemocyanin.

## Camouflage

Chromatophores in the skin let an octopus change colour in milliseconds.
"""

KETTLE = "The kettle whistles when the water boils.\n\nDescale it monthly with citric acid.\n"


def write_corpus(root: Path) -> Path:
    (root / "animals").mkdir(parents=True)
    (root / "animals" / "zebra.md").write_text(GUIDE)
    (root / "animals" / "octopus.md").write_text(OCTOPUS)
    (root / "kitchen.txt").write_text(KETTLE)
    return root


def ids(rag: Ragline, query: str, mode: str) -> list[str]:
    return [h.chunk.source for h in rag.search(query, mode=mode, top_k=20).hits]  # type: ignore[arg-type]


def test_first_run_then_unchanged_run_embeds_nothing(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    first = rag.ingest(corpus)
    assert first.failed == []
    assert sorted(first.indexed) == ["animals/octopus.md", "animals/zebra.md", "kitchen.txt"]
    assert first.chunks == first.chunks_embedded > 0
    assert first.index_chunks == first.chunks
    assert first.per_chapter["animals"].files == 2
    assert (tmp_path / "index" / "reports" / "last-ingest.json").is_file()

    again = rag.ingest(corpus)
    assert again.indexed == [] and again.chunks_embedded == 0
    assert sorted(again.skipped) == sorted(first.indexed)
    assert again.index_chunks == first.index_chunks
    # the per-chapter counts describe the index, whether files were skipped or not
    assert again.per_chapter["animals"].chunks == first.per_chapter["animals"].chunks


def test_edit_reembeds_only_changed_chunks(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag(chunk_min_tokens=0)  # keep each section its own chunk
    first = rag.ingest(corpus)
    zebra_chunks = rag.store.info({"source": (corpus / "animals/zebra.md").as_posix()}).chunks
    assert zebra_chunks >= 3

    edited = GUIDE.replace("in search of rain-fed grass.", "following the rains to fresh pasture.")
    (corpus / "animals" / "zebra.md").write_text(edited)
    second = rag.ingest(corpus)
    assert second.indexed == ["animals/zebra.md"]
    assert second.chunks == zebra_chunks
    assert 1 <= second.chunks_embedded < zebra_chunks
    assert second.chunks_reused == zebra_chunks - second.chunks_embedded
    assert second.index_chunks == first.index_chunks
    hits = rag.search("fresh pasture after the rains", mode="bm25").hits
    assert hits and hits[0].chunk.section == "Migration"
    old = rag.search("rain-fed grass", mode="bm25", top_k=20).hits
    assert all("rain-fed" not in h.chunk.text for h in old)


def test_deleted_file_leaves_both_indexes(make_rag: Callable[..., Ragline], tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    rag.ingest(corpus)
    octopus = (corpus / "animals" / "octopus.md").as_posix()
    assert octopus in ids(rag, "hemocyanin chromatophores", "bm25")
    assert octopus in ids(rag, "an animal with three hearts", "vector")

    (corpus / "animals" / "octopus.md").unlink()
    report = rag.ingest(corpus)
    assert report.deleted == ["animals/octopus.md"]
    assert octopus not in ids(rag, "hemocyanin chromatophores", "bm25")
    assert octopus not in ids(rag, "an animal with three hearts", "vector")
    assert all(d.source != octopus for d in rag.store.documents())


def test_ingesting_a_subfolder_does_not_delete_the_rest(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    rag.ingest(corpus)
    before = rag.store.info(None).chunks
    report = rag.ingest(corpus / "animals")
    assert report.deleted == [] and len(report.skipped) == 2
    assert rag.store.info(None).chunks == before


MALFORMED: dict[str, bytes] = {
    "bad-utf8.md": b"# Title\n\nfine line\n\xff\xfe broken bytes\n",
    "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
    "front.md": b"---\ntitle: [unclosed\n---\n\n# Body\n\ntext\n",
    "empty.md": b"",
}


def test_malformed_files_fail_alone_and_keep_the_index(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag(max_file_bytes=10 * 1024 * 1024)
    rag.ingest(corpus)
    before = rag.store.info(None).chunks
    zebra_before = rag.search("striped coats", mode="bm25").hits[0].chunk.id

    for name, data in MALFORMED.items():
        (corpus / name).write_bytes(data)
    with (corpus / "huge.md").open("wb") as f:  # 50 MB, sparse: never read
        f.truncate(50 * 1024 * 1024)
    (corpus / "animals" / "zebra.md").write_bytes(b"# Zebra\n\n\xc3\x28 now broken\n")
    (corpus / "new.md").write_text("# Giraffe\n\nGiraffes have long necks.\n")

    report = rag.ingest(corpus)
    failed = {f.path: f for f in report.failed}
    assert set(failed) == {*MALFORMED, "huge.md", "animals/zebra.md"}
    assert failed["bad-utf8.md"].line == 4
    assert "UTF-8" in failed["bad-utf8.md"].reason
    assert "binary" in failed["binary.md"].reason
    assert "front matter" in failed["front.md"].reason
    assert "empty" in failed["empty.md"].reason
    assert "RAGLINE_MAX_FILE_BYTES" in failed["huge.md"].reason
    assert failed["animals/zebra.md"].line == 3
    assert report.indexed == ["new.md"]
    # the broken zebra.md keeps its previous chunks; nothing else was lost
    assert rag.store.info(None).chunks > before
    assert rag.search("striped coats", mode="bm25").hits[0].chunk.id == zebra_before
    assert rag.search("long necks", mode="bm25").hits[0].chunk.title == "Giraffe"


def test_tenants_are_isolated(make_rag: Callable[..., Ragline], tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    other = tmp_path / "other"
    other.mkdir()
    (other / "secret.md").write_text("# Secret\n\nThe vault code is kept by the octopus.\n")
    rag = make_rag()
    rag.ingest(corpus, tenant="acme")
    rag.ingest(other, tenant="globex")
    acme = rag.search("vault code octopus", filters={"tenant": "acme"}, top_k=20).hits
    globex = rag.search("vault code octopus", filters={"tenant": "globex"}, top_k=20).hits
    assert acme and all(h.chunk.tenant == "acme" for h in acme)
    assert globex and all(h.chunk.tenant == "globex" for h in globex)
    # the same path ingested for two tenants is two documents
    rag.ingest(other, tenant="acme")
    assert len([d for d in rag.store.documents() if d.source.endswith("secret.md")]) == 2


def test_another_model_is_refused(make_rag: Callable[..., Ragline], tmp_path: Path) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    rag.ingest(corpus)
    rag.store.fingerprint(ModelFingerprint("some-other-model", 384, "0" * 64))
    with pytest.raises(ModelMismatchError, match="some-other-model"):
        rag.ingest(corpus)
    fresh = make_rag(index=tmp_path / "index")
    with pytest.raises(ModelMismatchError, match="reindex"):
        fresh.search("zebra")


def test_reindex_reembeds_from_stored_chunks(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    rag.ingest(corpus)
    n = rag.store.info(None).chunks
    rag.store.fingerprint(ModelFingerprint("some-other-model", 384, "0" * 64))
    shutil.rmtree(corpus)  # reindex never reads the source files
    assert rag.reindex() == n
    assert rag.store.fingerprint() == rag.embedder.fingerprint
    assert rag.search("three hearts", mode="vector").hits[0].chunk.title == "Octopus notes"


def test_chunks_left_without_a_record_are_removed(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    """A crash between a batch's chunk commit and its record commit, then the file
    deleted: its chunks stayed searchable, listed by no record, removable by no API.
    Made here on the real LanceDB index by deleting a record behind the store's back."""
    import lancedb

    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    rag.ingest(corpus)
    octopus = next(r for r in rag.store.documents() if r.source.endswith("octopus.md"))
    path = rag.store.path  # type: ignore[attr-defined]
    rag.close()
    lancedb.connect(path).open_table("documents").delete(f"doc_id = '{octopus.doc_id}'")
    (corpus / "animals" / "octopus.md").unlink()

    rag = make_rag()
    assert "octopus.md" in ids(rag, "three hearts blue blood", "bm25")[0]  # the ghost
    report = rag.ingest(corpus)
    assert report.failed == [] and report.deleted == []
    assert report.orphans_removed == [octopus.source]
    assert not any("octopus" in s for s in ids(rag, "three hearts blue blood", "bm25"))
    assert rag.store.info().chunks == sum(r.chunk_count for r in rag.store.documents())
    assert rag.ingest(corpus).orphans_removed == []  # nothing left to find


def test_a_file_whose_record_was_lost_is_indexed_again(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    """The same crash while the file is still there: its chunks are replaced, never doubled."""
    import lancedb

    corpus = write_corpus(tmp_path / "corpus")
    rag = make_rag()
    first = rag.ingest(corpus)
    zebra = next(r for r in rag.store.documents() if r.source.endswith("zebra.md"))
    path = rag.store.path  # type: ignore[attr-defined]
    rag.close()
    lancedb.connect(path).open_table("documents").delete(f"doc_id = '{zebra.doc_id}'")
    rag = make_rag()
    report = rag.ingest(corpus)
    assert report.indexed == ["animals/zebra.md"]
    assert rag.store.info().chunks == first.index_chunks


def test_progress_counts_embedded_chunks_up_to_the_total(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    """Progress counts what costs time: chunks embedded of those known to need it,
    reaching the total, never going back; rate and ETA once a batch is embedded."""
    corpus = write_corpus(tmp_path / "corpus")
    events: list[IngestProgress] = []
    rag = make_rag(write_batch_chunks=2)  # several batches, so progress moves in steps
    report = rag.ingest(corpus, progress=events.append)
    assert report.failed == [] and report.chunks_embedded > 2

    embedded = [e.chunks_embedded for e in events]
    assert embedded == sorted(embedded)
    assert [e.files_done for e in events] == sorted(e.files_done for e in events)
    assert all(e.chunks_embedded <= e.chunks_to_embed for e in events)
    last = events[-1]
    assert last.chunks_embedded == last.chunks_to_embed == report.chunks_embedded
    assert last.files_done == last.files_total == 3
    # the total is only known as files are chunked: it grew, and the bar lagged it
    assert events[0].chunks_to_embed < report.chunks_embedded
    assert any(0 < e.chunks_embedded < e.chunks_to_embed for e in events)
    measured = [e for e in events if e.chunks_embedded]
    assert measured and all(e.rate is not None and e.rate > 0 for e in measured)
    assert last.eta_seconds == 0
    assert events[0].rate is None and events[0].eta_seconds is None
    assert {e.current for e in events} == {"animals/octopus.md", "animals/zebra.md", "kitchen.txt"}

    again: list[IngestProgress] = []
    rag.ingest(corpus, progress=again.append)
    assert again == []  # nothing to index, nothing to count


def test_ingest_repairs_a_malformed_stored_chunk(
    make_rag: Callable[..., Ragline], tmp_path: Path
) -> None:
    """Issue 28: a stored row with ``text`` NULL (a crash, a hand edit) was left out of
    answers and reported by ``status`` but stayed broken, since its file's hash had
    not changed. ``ingest`` now indexes that file again; the other files are skipped."""
    import lancedb

    from ragline.store.base import MALFORMED_CHUNKS

    corpus = write_corpus(tmp_path / "corpus")
    index = tmp_path / "index"
    rag = make_rag(index)
    rag.ingest(corpus)
    zebra = (corpus / "animals/zebra.md").as_posix()
    bad = rag.search("zebra migration", mode="bm25").hits[0].chunk
    assert bad.source == zebra
    rag.close()
    table = lancedb.connect(str(index / "lance")).open_table("chunks")
    table.update(where=f"id = '{bad.id}'", values_sql={"text": "NULL"})
    MALFORMED_CHUNKS.note(bad.id, "field text is missing, not text")  # as a search notes it

    rag = make_rag(index)
    assert rag.status()["malformed_chunks"]["count"] == 1
    report = rag.ingest(corpus)
    assert report.indexed == ["animals/zebra.md"]
    assert sorted(report.skipped) == ["animals/octopus.md", "kitchen.txt"]
    assert report.chunks_embedded == 0  # the stored vectors are reused
    (warning,) = [w for w in report.warnings if "malformed" in w.reason]
    assert warning.path == "animals/zebra.md" and "field text is missing" in warning.reason
    rag.close()

    rag = make_rag(index)
    assert rag.status()["malformed_chunks"] == {"count": 0, "ids": {}}
    assert bad.id not in MALFORMED_CHUNKS.snapshot()
    hits = rag.search("zebra migration", mode="bm25").hits
    assert hits[0].chunk.id == bad.id and hits[0].chunk.text == bad.text
    again = rag.ingest(corpus)
    assert again.indexed == [] and not [w for w in again.warnings if "malformed" in w.reason]
