"""Ruled tables in a PDF's text layer come back as tables, on their page."""

from __future__ import annotations

import io
from pathlib import Path

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Table, TableStyle

from ragline.embed.tokenizer import TokenCounter
from ragline.ingest.chunk import SectionChunker
from ragline.ingest.parse import parse_file
from ragline.ingest.parse.pdf_tables import draws_paths
from ragline.types import BlockKind

LIMIT = 50_000_000
ROWS = [["Pump", "Pressure (bar)", "Flow (l/min)"], ["P-101", "4", "120"], ["P-102", "6", "95"]]


def report_pdf(rows: list[list[str]], *, ruled: bool = True) -> bytes:
    styles = getSampleStyleSheet()
    table = Table(rows)
    if ruled:
        table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
    story = [
        Paragraph("Plain first page about the pump station.", styles["BodyText"]),
        PageBreak(),
        Paragraph("Pump test results were recorded in March.", styles["BodyText"]),
        table,
        Paragraph("The station passed its inspection.", styles["BodyText"]),
    ]
    buf = io.BytesIO()
    SimpleDocTemplate(buf, pagesize=A4).build(story)
    return buf.getvalue()


def test_a_ruled_table_is_a_table_block_between_its_text(tmp_path: Path) -> None:
    doc = parse_file(tmp_path / "r.pdf", report_pdf(ROWS), max_bytes=LIMIT)
    assert doc.metadata["table_pages"] == [2]
    parts = [(b.kind, b.page, doc.body[b.start : b.end]) for b in doc.blocks]
    assert parts == [
        (BlockKind.PAGE, 1, "Plain first page about the pump station."),
        (BlockKind.PAGE, 2, "Pump test results were recorded in March."),
        (
            BlockKind.TABLE,
            2,
            "| Pump | Pressure (bar) | Flow (l/min) |\n| --- | --- | --- |\n"
            "| P-101 | 4 | 120 |\n| P-102 | 6 | 95 |",
        ),
        (BlockKind.PAGE, 2, "The station passed its inspection."),
    ]


def test_unruled_tables_and_the_setting_off_keep_the_text_layer(tmp_path: Path) -> None:
    for data, tables in ((report_pdf(ROWS, ruled=False), True), (report_pdf(ROWS), False)):
        doc = parse_file(tmp_path / "r.pdf", data, max_bytes=LIMIT, pdf_tables=tables)
        assert "table_pages" not in doc.metadata
        assert {b.kind for b in doc.blocks} == {BlockKind.PAGE}
        assert "P-101" in doc.body


def test_a_long_pdf_table_is_split_with_its_header(tmp_path: Path) -> None:
    rows = [ROWS[0], *[[f"P-{i:03d}", str(i % 9), str(50 + i)] for i in range(1, 41)]]
    doc = parse_file(tmp_path / "r.pdf", report_pdf(rows), max_bytes=LIMIT)
    table = next(b for b in doc.blocks if b.kind is BlockKind.TABLE)
    assert table.page == 2
    chunks = SectionChunker(TokenCounter(), max_tokens=80, overlap_tokens=10, min_tokens=0)
    drafts = chunks.chunk(doc)
    parts = [c for c in drafts if c.has_table and c.page == 2]
    header = "| Pump | Pressure (bar) | Flow (l/min) |\n| --- | --- | --- |\n"
    assert len(parts) > 2
    assert all(c.text.startswith(header) for c in parts[1:])
    # no chunk holds text of two pages (no overlap across a page break either)
    assert next(c for c in drafts if c.page == 2).text.startswith("Pump test results")
    # a table running onto the next page is a new table there, headed by its first row
    assert [c.page for c in drafts if c.has_table][-1] == 3


def test_only_pages_drawing_lines_are_examined() -> None:
    assert draws_paths(b"q 1 0 0 1 72 720 cm 0 0 200 14 re S Q")
    assert draws_paths(b"72 700 m 300 700 l S")
    assert not draws_paths(b"BT /F1 12 Tf 72 720 Td (Hello) Tj ET")
