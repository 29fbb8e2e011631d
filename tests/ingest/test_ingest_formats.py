"""A folder of Office files, an e-book, a spreadsheet and a scan, through the real engine:
ingested with sections, tables and page/slide numbers, and answered with citations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragline.engine import Ragline
from ragline.types import Chunk

QUESTIONS = [
    # (question, file, heading path of the cited chunk, page of the cited chunk, words in answer)
    (
        "How often must the gearbox oil of a wind turbine be replaced?",
        "handbook.docx",
        ("Inspection schedule",),
        None,
        "18 months",
    ),
    (
        "Which region grew revenue by 37 percent?",
        "sales.pptx",
        ("Regional Results",),
        2,
        "Nordic",
    ),
    (
        "How many fishermen did the lighthouse keeper rescue during the storm of 1893?",
        "lighthouse.epub",
        ("The Storm",),
        None,
        "eleven fishermen",
    ),
    (
        "What did the inspection find on the northern cable anchors of the Harbour Bridge?",
        "bridge-scan.pdf",
        (),
        2,
        "corrosion",
    ),
    (
        "What is the lead time in days of Fjordline Metals?",
        "supply.xlsx",
        ("Suppliers",),
        1,
        "Supplier: Fjordline Metals; Country: Norway; Lead time (days): 21",
    ),
    (
        "What is the altitude of the Mauna Kea observatory?",
        "observatories.csv",
        (),
        None,
        "Observatory: Mauna Kea; Country: United States; Altitude (m): 4207",
    ),
]


@pytest.fixture
def rag(make_rag: Callable[..., Ragline], office_folder: Path) -> Ragline:
    rag = make_rag()  # default settings: tiny slides and pages keep their own chunks
    report = rag.ingest(office_folder)
    assert report.failed == []
    assert sorted(Path(p).name for p in report.indexed) == sorted(
        [
            *("handbook.docx", "sales.pptx", "supply.xlsx", "observatories.csv"),
            *("lighthouse.epub", "bridge-scan.pdf"),
        ]
    )
    return rag


def all_chunks(rag: Ragline) -> dict[str, Chunk]:
    return {c.id: c for batch, _ in rag.store.iter_chunks() for c in batch}


def test_formats_ingest_with_sections_tables_and_pages(rag: Ragline) -> None:
    by_file: dict[str, list[Chunk]] = {}
    for chunk in all_chunks(rag).values():
        by_file.setdefault(Path(chunk.source).name, []).append(chunk)
    slides = {c.page for c in by_file["sales.pptx"]}
    assert slides == {1, 2, 3}
    assert all(c.heading_path for c in by_file["sales.pptx"])
    assert {c.page for c in by_file["bridge-scan.pdf"]} <= {1, 2}
    assert 2 in {c.page for c in by_file["bridge-scan.pdf"]}
    docx_paths = {c.heading_path for c in by_file["handbook.docx"]}
    assert ("Inspection schedule",) in docx_paths or (
        "Inspection schedule",
        "Torque values",
    ) in docx_paths
    assert any("| M36 flange bolt | 2800 | yearly |" in c.text for c in by_file["handbook.docx"])
    log = [c for c in by_file["supply.xlsx"] if c.heading_path == ("Shipment log",)]
    log.sort(key=lambda c: c.chunk_index)
    assert len(log) > 1  # 300 rows do not fit one chunk
    header = "| Shipment | Destination | Weight (kg) |\n| --- | --- | --- |\n"
    assert log[0].text.startswith("# Shipment log\n\n" + header)
    assert all(c.text.startswith(header) for c in log[1:])
    # a 15-word chapter is merged into the next one, as any tiny section is
    epub_paths = {c.heading_path for c in by_file["lighthouse.epub"]}
    assert ("The Storm",) in epub_paths and epub_paths <= {("Arrival",), ("The Storm",)}
    assert "\n| --- | --- | --- |\n" in by_file["observatories.csv"][0].text
    titles = {name: chunks[0].title for name, chunks in by_file.items()}
    assert titles["handbook.docx"] == "Turbine Maintenance Handbook"
    assert titles["lighthouse.epub"] == "The Lighthouse Keeper"
    assert titles["sales.pptx"] == "Quarterly Sales Review"


@pytest.mark.parametrize(("question", "file", "path", "page", "expected"), QUESTIONS)
def test_a_question_about_each_file_is_answered_with_a_citation_to_it(
    rag: Ragline,
    question: str,
    file: str,
    path: tuple[str, ...],
    page: int | None,
    expected: str,
) -> None:
    answer = rag.ask(question)
    assert not answer.fallback, answer.text
    assert expected in answer.text
    chunks = all_chunks(rag)
    cited = [chunks[c.chunk_id] for c in answer.citations]
    assert cited, answer.text
    first = cited[0]
    assert Path(first.source).name == file
    assert first.heading_path[: len(path)] == path
    assert first.page == page


@pytest.mark.parametrize(
    ("question", "file", "path", "header", "row"),
    [
        (
            "Fjordline Metals lead time in days",
            "supply.xlsx",
            ("Suppliers",),
            "| Supplier | Country | Lead time (days) |\n| --- | --- | --- |\n",
            "| Fjordline Metals | Norway | 21 |",
        ),
        (
            "altitude of the Mauna Kea observatory",
            "observatories.csv",
            (),
            "| Observatory | Country | Altitude (m) |\n| --- | --- | --- |\n",
            "| Mauna Kea | United States | 4207 |",
        ),
    ],
)
def test_a_question_about_a_sheet_finds_its_row_under_the_header(
    rag: Ragline, question: str, file: str, path: tuple[str, ...], header: str, row: str
) -> None:
    """The row is retrieved under its table's header, which is what a generator
    (extractive or a model) is given to answer from."""
    top = rag.search(question).hits[0].chunk
    assert Path(top.source).name == file
    assert top.heading_path == path
    assert header in top.text
    assert row in top.text.split(header, 1)[1]


def test_reingest_of_unchanged_office_files_embeds_nothing(
    rag: Ragline, office_folder: Path
) -> None:
    again = rag.ingest(office_folder)
    assert again.failed == []
    assert again.chunks_embedded == 0
    assert len(again.skipped) == 6


def test_a_broken_office_file_fails_alone(
    make_rag: Callable[..., Ragline], office_folder: Path
) -> None:
    (office_folder / "broken.docx").write_bytes(b"not a docx")
    report = make_rag().ingest(office_folder)
    assert [Path(f.path).name for f in report.failed] == ["broken.docx"]
    assert "corrupt .docx file" in report.failed[0].reason
    assert len(report.indexed) == 6
