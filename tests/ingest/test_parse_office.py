"""Office, spreadsheet and e-book parsers: structure, tables, slide numbers, bad files."""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from ragline.ingest.chunk.section import SectionChunker
from ragline.ingest.parse import IngestError, parse_file
from ragline.types import ParsedDocument

LIMIT = 50_000_000


def parse(path: Path) -> ParsedDocument:
    return parse_file(path, path.read_bytes(), max_bytes=LIMIT)


def kinds(doc: ParsedDocument) -> list[tuple[str, tuple[str, ...], str]]:
    return [(b.kind.name, b.heading_path, doc.body[b.start : b.end]) for b in doc.blocks]


def words(text: str) -> int:
    return len(text.split())


def test_docx_headings_lists_and_tables(tmp_path: Path, gen: ModuleType) -> None:
    doc = parse(gen.write_docx(tmp_path / "handbook.docx"))
    assert (doc.format, doc.title) == ("docx", "Turbine Maintenance Handbook")
    blocks = kinds(doc)
    headings = [(path, text) for kind, path, text in blocks if kind == "HEADING"]
    assert headings == [
        (("Turbine Maintenance Handbook",), "# Turbine Maintenance Handbook"),
        (("Inspection schedule",), "# Inspection schedule"),
        (("Inspection schedule", "Torque values"), "## Torque values"),
        (("Safety",), "# Safety"),
    ]
    lists = [text for kind, _, text in blocks if kind == "LIST"]
    assert lists == [
        "- Check the blade pitch bearings\n- Grease the yaw drive\n"
        "1. Record vibration levels\n2. Send the log to the operator"
    ]
    tables = [(path, text) for kind, path, text in blocks if kind == "TABLE"]
    assert tables == [
        (
            ("Inspection schedule", "Torque values"),
            "| Bolt | Torque (Nm) | Interval |\n| --- | --- | --- |\n"
            "| M36 flange bolt | 2800 | yearly |\n| M24 blade bolt | 950 | monthly |",
        )
    ]
    gearbox = next(b for b in doc.blocks if gen.DOCX_GEARBOX in doc.body[b.start : b.end])
    assert gearbox.heading_path == ("Inspection schedule",)
    assert all(b.page is None for b in doc.blocks)  # a .docx has no pages until laid out


def test_docx_numbered_headings_stay_headings(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    heading = d.add_heading("Scope", 1)
    numpr = heading._p.get_or_add_pPr().get_or_add_numPr()
    numpr.get_or_add_ilvl().val = 0
    numpr.get_or_add_numId().val = 1
    d.add_paragraph("This standard covers pressure vessels.")
    d.save(str(tmp_path / "n.docx"))
    doc = parse(tmp_path / "n.docx")
    assert kinds(doc) == [
        ("HEADING", ("Scope",), "# Scope"),
        ("PARAGRAPH", ("Scope",), "This standard covers pressure vessels."),
    ]


def test_pptx_slides_are_numbered_sections_with_notes(tmp_path: Path, gen: ModuleType) -> None:
    doc = parse(gen.write_pptx(tmp_path / "sales.pptx"))
    assert (doc.format, doc.title, doc.metadata) == (
        "pptx",
        "Quarterly Sales Review",
        {"slides": 3},
    )
    assert kinds(doc) == [
        ("HEADING", ("Quarterly Sales Review",), "# Quarterly Sales Review"),
        (
            "LIST",
            ("Quarterly Sales Review",),
            "- Revenue overview for the third quarter\n  - All figures in euros",
        ),
        ("HEADING", ("Regional Results",), "# Regional Results"),
        ("PARAGRAPH", ("Regional Results",), gen.PPTX_NORDIC),
        ("PARAGRAPH", ("Regional Results",), "Notes: " + gen.PPTX_NOTES),
        ("HEADING", ("Product Table",), "# Product Table"),
        (
            "TABLE",
            ("Product Table",),
            "| Product | Units |\n| --- | --- |\n| Heat pump | 1200 |\n| Boiler | 300 |",
        ),
    ]
    assert [b.page for b in doc.blocks] == [1, 1, 2, 2, 2, 3, 3]


def test_xlsx_sheets_are_sections_of_tables(tmp_path: Path, gen: ModuleType) -> None:
    doc = parse(gen.write_xlsx(tmp_path / "supply.xlsx", log_rows=3))
    assert doc.format == "xlsx"
    assert doc.metadata == {"sheets": ["Suppliers", "Shipment log"]}
    assert kinds(doc) == [
        ("HEADING", ("Suppliers",), "# Suppliers"),
        (
            "TABLE",
            ("Suppliers",),
            "| Supplier | Country | Lead time (days) |\n| --- | --- | --- |\n"
            "| Fjordline Metals | Norway | 21 |\n| Castilla Polymers | Spain | 9 |",
        ),
        ("HEADING", ("Shipment log",), "# Shipment log"),
        (
            "TABLE",
            ("Shipment log",),
            "| Shipment | Destination | Weight (kg) |\n| --- | --- | --- |\n"
            "| SH-0001 | Depot 1 | 101 |\n| SH-0002 | Depot 2 | 102 |\n| SH-0003 | Depot 3 | 103 |",
        ),
    ]
    assert [b.page for b in doc.blocks] == [1, 1, 2, 2]  # a sheet's place in the workbook


def test_a_big_sheet_is_cut_between_rows_with_its_header_repeated(
    tmp_path: Path, gen: ModuleType
) -> None:
    doc = parse(gen.write_xlsx(tmp_path / "supply.xlsx", log_rows=300))
    chunks = SectionChunker(words, max_tokens=120, overlap_tokens=10, min_tokens=0).chunk(doc)
    log = [c for c in chunks if c.heading_path == ("Shipment log",)]
    assert len(log) > 5
    header = "| Shipment | Destination | Weight (kg) |\n| --- | --- | --- |\n"
    for c in log[1:]:
        assert c.text.startswith(header)
        assert c.prefix_len == len(header)
        assert c.has_table
        assert all(
            re.fullmatch(r"\| SH-\d{4} \| Depot \d \| \d+ \|", line)
            for line in c.text[len(header) :].split("\n")
        )
    rows = [line for c in log for line in c.text.split("\n") if line.startswith("| SH-")]
    assert rows == [f"| SH-{i:04d} | Depot {i % 7} | {100 + i} |" for i in range(1, 301)]


def test_csv_is_one_table_whatever_its_separator(tmp_path: Path, gen: ModuleType) -> None:
    doc = parse(gen.write_csv(tmp_path / "observatories.csv"))
    assert (doc.format, doc.title, doc.metadata) == ("csv", "observatories", {"rows": 3})
    assert kinds(doc) == [
        (
            "TABLE",
            (),
            "| Observatory | Country | Altitude (m) |\n| --- | --- | --- |\n"
            "| Roque de los Muchachos | Spain | 2396 |\n| Mauna Kea | United States | 4207 |\n"
            "| Paranal | Chile | 2635 |",
        )
    ]
    semi = tmp_path / "semi.csv"
    semi.write_text("name;size\nalpha;1\nbeta|x;2\n", encoding="utf-8")
    assert (
        kinds(parse(semi))[0][2]
        == "| name | size |\n| --- | --- |\n| alpha | 1 |\n| beta\\|x | 2 |"
    )


def test_malformed_csv_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text('a,b\n1,2\n3,"unclosed\n', encoding="utf-8")
    with pytest.raises(IngestError) as info:
        parse(bad)
    assert info.value.source == str(bad)
    assert info.value.line == 3
    assert "malformed CSV" in str(info.value)


def test_epub_chapters_are_sections(tmp_path: Path, gen: ModuleType) -> None:
    doc = parse(gen.write_epub(tmp_path / "lighthouse.epub"))
    assert (doc.format, doc.title) == ("epub", "The Lighthouse Keeper")
    assert doc.metadata == {"author": "A. Writer", "language": "en", "chapters": 2}
    assert [(k, p) for k, p, _ in kinds(doc)] == [
        ("HEADING", ("Arrival",)),
        ("PARAGRAPH", ("Arrival",)),
        ("HEADING", ("The Storm",)),
        ("PARAGRAPH", ("The Storm",)),
    ]
    assert gen.EPUB_STORM in doc.body


def test_epub_chapter_without_heading_takes_its_toc_title(tmp_path: Path) -> None:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("x")
    book.set_title("Notes")
    ch = epub.EpubHtml(title="Field Notes", file_name="notes.xhtml")
    ch.content = "<html><body><p>Seen three otters at dawn.</p></body></html>"
    book.add_item(ch)
    book.toc = [ch]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = [ch]
    epub.write_epub(str(tmp_path / "n.epub"), book)
    doc = parse(tmp_path / "n.epub")
    assert kinds(doc) == [
        ("HEADING", ("Field Notes",), "# Field Notes"),
        ("PARAGRAPH", ("Field Notes",), "Seen three otters at dawn."),
    ]


def test_odt_headings_lists_and_tables(tmp_path: Path, gen: ModuleType) -> None:
    doc = parse(gen.write_odt(tmp_path / "bees.odt"))
    assert (doc.format, doc.title) == ("odt", "Beekeeping Guide")
    assert kinds(doc) == [
        ("HEADING", ("Beekeeping Guide",), "# Beekeeping Guide"),
        ("PARAGRAPH", ("Beekeeping Guide",), "Hives are opened only on warm,  calm afternoons."),
        ("HEADING", ("Beekeeping Guide", "Swarming"), "## Swarming"),
        (
            "PARAGRAPH",
            ("Beekeeping Guide", "Swarming"),
            "A colony swarms when the hive runs out of room in late spring.",
        ),
        (
            "LIST",
            ("Beekeeping Guide", "Swarming"),
            "- Add a super\n- Remove queen cells\n  - every nine days",
        ),
        (
            "TABLE",
            ("Beekeeping Guide", "Swarming"),
            "| Month | Task |\n| --- | --- |\n| May | Inspect weekly |",
        ),
    ]


@pytest.mark.parametrize("suffix", [".docx", ".pptx", ".xlsx", ".epub", ".odt"])
def test_malformed_office_files_fail_naming_the_file(tmp_path: Path, suffix: str) -> None:
    not_zip = tmp_path / f"junk{suffix}"
    not_zip.write_bytes(b"this is not a zip archive at all")
    empty_zip = tmp_path / f"empty{suffix}"
    with zipfile.ZipFile(empty_zip, "w") as z:
        z.writestr("hello.txt", "no office parts here")
    for path in (not_zip, empty_zip):
        with pytest.raises(IngestError, match=f"corrupt \\{suffix} file") as info:
            parse(path)
        assert info.value.source == str(path)
        assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    ("suffix", "module"),
    [(".docx", "docx"), (".pptx", "pptx"), (".xlsx", "openpyxl"), (".epub", "ebooklib")],
)
def test_missing_office_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, module: str
) -> None:
    path = tmp_path / f"a{suffix}"
    path.write_bytes(b"PK\x03\x04 whatever")
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(IngestError) as info:
        parse(path)
    assert info.value.source == str(path)
    assert f"needs the office extra ({module} is not installed)" in info.value.reason
    assert "pip install -e '.[office]'" in info.value.reason


def test_office_blocks_are_trimmed_and_never_empty(tmp_path: Path, gen: ModuleType) -> None:
    for name, write in [
        ("a.docx", gen.write_docx),
        ("b.pptx", gen.write_pptx),
        ("c.epub", gen.write_epub),
        ("d.odt", gen.write_odt),
    ]:
        doc = parse(write(tmp_path / name))
        for block in doc.blocks:
            text = doc.body[block.start : block.end]
            assert text == text.strip() and text
