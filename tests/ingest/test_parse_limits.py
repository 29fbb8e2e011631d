"""Small files that ask for huge work: zip bombs in Office files and EPUBs, a
spreadsheet that declares the whole sheet or pads every row to column XFD. Each
is refused (or read within bounds) before memory grows, and fails alone."""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ragline.engine import Ragline
from ragline.ingest.errors import IngestError
from ragline.ingest.parse import ParseLimits, parse_file
from ragline.ingest.parse.limits import check_archive

MiB = 1024 * 1024


def with_member(archive: Path, name: str, data: bytes) -> bytes:
    """``archive`` (a real Office file or EPUB) with one more, deflated, member."""
    out = io.BytesIO()
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info, src.read(info))
        z.writestr(name, data)
    return out.getvalue()


def replace_member(archive: Path, name: str, text: str) -> bytes:
    """``archive`` with member ``name`` rewritten to ``text``."""
    out = io.BytesIO()
    with zipfile.ZipFile(archive) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for info in src.infolist():
            z.writestr(info, text if info.filename == name else src.read(info))
    return out.getvalue()


SHEET = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">
<dimension ref="{dim}"/><sheetData>{rows}</sheetData></worksheet>"""


def cell(ref: str, text: str) -> str:
    return f'<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


def test_zip_bomb_members_are_refused_before_parsing(tmp_path: Path, gen: ModuleType) -> None:
    docx = gen.write_docx(tmp_path / "handbook.docx")
    bomb = with_member(docx, "word/media/pad.bin", b"\0" * (20 * MiB))
    assert len(bomb) < 200 * 1024  # ~1000:1
    limits = ParseLimits(max_unpacked_bytes=10 * MiB)
    with pytest.raises(IngestError) as err:
        parse_file(Path("bomb.docx"), bomb, max_bytes=MiB, limits=limits)
    assert err.value.source == "bomb.docx"
    assert "RAGLINE_MAX_UNPACKED_BYTES" in err.value.reason
    assert "10,485,760" in err.value.reason and "word/media/pad.bin" in err.value.reason
    # under the total, the ratio still refuses it (the default ratio is 500)
    with pytest.raises(IngestError) as err:
        parse_file(Path("bomb.docx"), bomb, max_bytes=MiB, limits=ParseLimits())
    assert "RAGLINE_MAX_UNPACK_RATIO" in err.value.reason
    # the same file without the bomb parses
    assert parse_file(Path("ok.docx"), docx.read_bytes(), max_bytes=MiB, limits=limits).blocks


def test_every_zip_format_is_checked(tmp_path: Path, gen: ModuleType) -> None:
    makers = {
        ".epub": gen.write_epub,
        ".pptx": gen.write_pptx,
        ".xlsx": gen.write_xlsx,
        ".odt": gen.write_odt,
        ".docx": gen.write_docx,
    }
    for suffix, make in makers.items():
        real = make(tmp_path / f"real{suffix}")
        bomb = with_member(real, "pad.xml", b" " * (4 * MiB))
        with pytest.raises(IngestError, match="RAGLINE_MAX_UNPACK_RATIO"):
            parse_file(Path(f"bomb{suffix}"), bomb, max_bytes=MiB)


def test_small_well_compressed_members_pass() -> None:
    """Real Office XML compresses well; only members over 1 MiB are judged by ratio."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("styles.xml", b" " * (512 * 1024))
    check_archive(out.getvalue(), "ok.docx", ParseLimits())


def sheet_book(tmp_path: Path, gen: ModuleType, dim: str, cells: list[tuple[int, str]]) -> bytes:
    """A real workbook whose first sheet is rewritten to hold ``cells`` (row, text)
    in column A under the declared dimension ``dim``."""
    book = gen.write_xlsx(tmp_path / "supply.xlsx", log_rows=2)
    rows = "".join(f'<row r="{r}">{cell(f"A{r}", text)}</row>' for r, text in cells)
    return replace_member(book, "xl/worksheets/sheet1.xml", SHEET.format(dim=dim, rows=rows))


def test_declared_whole_sheet_reads_only_present_cells(tmp_path: Path, gen: ModuleType) -> None:
    """openpyxl pads every row to the declared dimension: A1:XFD1048576 made each
    row 16,384 cells. The declaration is ignored and only the cells present read."""
    data = sheet_book(tmp_path, gen, "A1:XFD1048576", [(1, "Item"), (2, "bolts")])
    doc = parse_file(Path("dim.xlsx"), data, max_bytes=MiB)
    assert "| Item |\n| --- |\n| bolts |" in doc.body


def test_a_far_row_under_a_huge_dimension_is_refused_small(tmp_path: Path, gen: ModuleType) -> None:
    """5 kB: rows 1, 2 and 1,048,576 under A1:XFD1048576 grew without end (every
    missing row became 16,384 empty cells); now refused at the cell cap (a blank
    row counts as one cell), in little memory, naming the sheet and the setting."""
    cells = [(1, "Item"), (2, "bolts"), (1_048_576, "end")]
    data = sheet_book(tmp_path, gen, "A1:XFD1048576", cells)
    assert len(data) < 20_000
    tracemalloc.start()
    with pytest.raises(IngestError) as err:  # a low cap keeps the test quick
        parse_file(Path("dim.xlsx"), data, max_bytes=MiB, limits=ParseLimits(max_sheet_cells=10**4))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 50 * MiB
    assert err.value.source == "dim.xlsx" and "sheet 'Suppliers'" in err.value.reason
    assert "RAGLINE_MAX_SHEET_CELLS" in err.value.reason


def test_rows_padded_to_the_last_column_are_refused(tmp_path: Path, gen: ModuleType) -> None:
    """Rows with one cell at column XFD pad to 16,384 cells each: over the cap, the
    file is refused with the sheet and the setting named."""
    book = gen.write_xlsx(tmp_path / "supply.xlsx", log_rows=2)
    rows = "".join(f'<row r="{r}">{cell(f"XFD{r}", "x")}</row>' for r in range(1, 200))
    data = replace_member(book, "xl/worksheets/sheet1.xml", SHEET.format(dim="A1", rows=rows))
    with pytest.raises(IngestError) as err:
        parse_file(Path("wide.xlsx"), data, max_bytes=MiB)
    assert "sheet 'Suppliers'" in err.value.reason
    assert "RAGLINE_MAX_SHEET_CELLS" in err.value.reason and "200,000" in err.value.reason


def test_csv_cells_are_capped() -> None:
    data = b"a,b,c\n" + b"1,2,3\n" * 400
    with pytest.raises(IngestError, match="CSV file has more than 1,000 cells"):
        parse_file(Path("big.csv"), data, max_bytes=MiB, limits=ParseLimits(max_sheet_cells=1000))
    assert parse_file(Path("ok.csv"), data, max_bytes=MiB).metadata["rows"] == 400


def test_a_bomb_fails_alone_and_keeps_what_was_stored(
    make_rag: Callable[..., Ragline], tmp_path: Path, gen: ModuleType
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    docx = gen.write_docx(corpus / "handbook.docx")
    (corpus / "giraffe.md").write_text("# Giraffe\n\nGiraffes eat acacia leaves.\n")
    rag = make_rag(max_unpacked_bytes=8 * MiB)
    first = rag.ingest(corpus)
    assert sorted(first.indexed) == ["giraffe.md", "handbook.docx"]
    before = rag.store.info().chunks
    docx.write_bytes(with_member(docx, "word/media/pad.bin", b"\0" * (10 * MiB)))
    report = rag.ingest(corpus)
    failed = {f.path: f.reason for f in report.failed}
    assert list(failed) == ["handbook.docx"]
    assert "RAGLINE_MAX_UNPACKED_BYTES" in failed["handbook.docx"]
    assert "8,388,608" in failed["handbook.docx"]
    assert rag.store.info().chunks == before  # the old chunks of handbook.docx stay
    hits = rag.search("gearbox oil replaced every 18 months", top_k=3).hits
    assert hits and hits[0].chunk.source.endswith("handbook.docx")


def test_markdown_with_too_many_lines_is_refused_before_parsing() -> None:
    """A million one-line headings parsed for minutes into gigabytes."""
    data = "".join(f"# Heading {i}\n" for i in range(2001)).encode()
    limits = ParseLimits(max_markdown_lines=2000)
    with pytest.raises(IngestError) as err:
        parse_file(Path("many.md"), data, max_bytes=MiB, limits=limits)
    assert err.value.source == "many.md"
    assert "2,002 lines" in err.value.reason and "RAGLINE_MAX_MARKDOWN_LINES" in err.value.reason
    ok = parse_file(Path("ok.md"), data, max_bytes=MiB, limits=ParseLimits())
    assert len(ok.blocks) == 2001


def test_pdf_with_too_many_pages_is_refused_before_reading_them() -> None:
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(3000):
        writer.add_blank_page(width=200, height=200)
    out = io.BytesIO()
    writer.write(out)
    data = out.getvalue()
    assert len(data) < MiB
    with pytest.raises(IngestError) as err:
        parse_file(
            Path("long.pdf"), data, max_bytes=MiB, ocr=None, limits=ParseLimits(max_pdf_pages=1000)
        )
    assert (
        err.value.reason == "PDF has 3,000 pages, over the limit of 1,000 (RAGLINE_MAX_PDF_PAGES)"
    )


def test_html_with_too_many_tags_is_refused_before_parsing() -> None:
    """A million nested <div> built a tree for 27 CPU-seconds, then hit the recursion limit."""
    nested = "<html><body>" + "<div>" * 3000 + "deep" + "</div>" * 3000 + "</body></html>"
    with pytest.raises(IngestError) as err:
        parse_file(
            Path("deep.html"),
            nested.encode(),
            max_bytes=MiB,
            limits=ParseLimits(max_html_tags=5000),
        )
    assert err.value.source == "deep.html"
    assert "6,004 tags" in err.value.reason and "RAGLINE_MAX_HTML_TAGS" in err.value.reason
    # under the tag cap, nesting past the recursion limit is a clear error, not a crash
    with pytest.raises(IngestError, match="nested too deeply"):
        parse_file(Path("deep.html"), nested.encode(), max_bytes=MiB)
