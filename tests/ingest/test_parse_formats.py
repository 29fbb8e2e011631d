"""parse_file's shared checks, and the text, HTML and PDF parsers."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from ragline.ingest.errors import IngestError
from ragline.ingest.parse import SUPPORTED_SUFFIXES, parse_file
from ragline.ingest.parse.html import parse_html
from ragline.ingest.parse.text import parse_text
from ragline.types import BlockKind, ParsedDocument

LIMIT = 1_000_000


def texts(doc: ParsedDocument) -> list[str]:
    return [doc.body[b.start : b.end] for b in doc.blocks]


def make_pdf(
    pages: list[list[str]], *, title: str | None = None, encrypt: str | None = None
) -> bytes:
    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, pagesize=A4, encrypt=encrypt)
    if title:
        pdf.setTitle(title)
    for lines in pages:
        y = 780
        for line in lines:
            pdf.drawString(72, y, line)
            y -= 16
        pdf.showPage()
    pdf.save()
    return buf.getvalue()


# -- shared checks ------------------------------------------------------------------


def test_supported_suffixes() -> None:
    assert {
        *(".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf", ".csv"),
        *(".docx", ".pptx", ".xlsx", ".epub", ".odt", ".png", ".jpg", ".jpeg", ".tif", ".tiff"),
    } == SUPPORTED_SUFFIXES


def test_dispatch_on_suffix_case_insensitively() -> None:
    assert parse_file(Path("a/B.MD"), b"# T\n\nx\n", max_bytes=LIMIT).format == "markdown"
    assert parse_file(Path("a/b.txt"), b"T\n\nx\n", max_bytes=LIMIT).format == "text"
    assert parse_file(Path("a/b.htm"), b"<p>x</p>", max_bytes=LIMIT).format == "html"


def test_unsupported_suffix() -> None:
    with pytest.raises(IngestError, match=r"unsupported file type '\.odp'"):
        parse_file(Path("a.odp"), b"x", max_bytes=LIMIT)


def test_too_large_names_size_limit_and_setting(tmp_path: Path) -> None:
    with pytest.raises(IngestError) as info:
        parse_file(tmp_path / "big.md", b"x" * 2001, max_bytes=2000)
    msg = str(info.value)
    assert msg.startswith(f"{tmp_path / 'big.md'}: ")
    assert "2,001 bytes" in msg and "2,000 bytes" in msg and "RAGLINE_MAX_FILE_BYTES" in msg


@pytest.mark.parametrize("data", [b"", b"  \n\t\n", "\u00a0\u2003\n".encode()])
def test_empty_or_whitespace_only(data: bytes) -> None:
    with pytest.raises(IngestError, match="empty"):
        parse_file(Path("e.md"), data, max_bytes=LIMIT)


def test_binary_content_in_text_format() -> None:
    with pytest.raises(IngestError, match=r"binary file named \.md") as info:
        parse_file(Path("img.md"), b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", max_bytes=LIMIT)
    assert info.value.line == 3  # the NUL is on the third line


def test_invalid_utf8_gives_line_of_first_bad_byte() -> None:
    data = "line one\nline two\nna\u00efve\n".encode("latin-1")
    with pytest.raises(IngestError, match="not valid UTF-8") as info:
        parse_file(Path("docs/l1.txt"), data, max_bytes=LIMIT)
    assert info.value.line == 3
    assert str(info.value).startswith("docs/l1.txt:3: not valid UTF-8: byte 0xef at column 3")


def test_utf8_bom_is_stripped() -> None:
    doc = parse_file(Path("bom.md"), b"\xef\xbb\xbf# Title\n\ntext\n", max_bytes=LIMIT)
    assert doc.body.startswith("# Title")
    assert doc.title == "Title"


def test_front_matter_only_has_nothing_to_index() -> None:
    with pytest.raises(IngestError, match="no text to index"):
        parse_file(Path("fm.md"), b"---\ntitle: x\n---\n", max_bytes=LIMIT)


def test_error_str_format() -> None:
    assert str(IngestError("docs/a.md", 12, "broken front matter: x")) == (
        "docs/a.md:12: broken front matter: x"
    )
    assert str(IngestError("docs/a.md", None, "too big")) == "docs/a.md: too big"


# -- text -------------------------------------------------------------------------


def test_text_paragraphs_and_title() -> None:
    body = "Release notes\n\nFirst paragraph\ncontinues here.  \n \t\n\n\nSecond one.\n"
    doc = parse_text(body, "notes/rel.txt")
    assert doc.title == "Release notes"
    assert texts(doc) == ["Release notes", "First paragraph\ncontinues here.", "Second one."]
    assert all(b.kind is BlockKind.PARAGRAPH for b in doc.blocks)
    assert [b.line for b in doc.blocks] == [1, 3, 8]


def test_text_long_first_line_falls_back_to_stem() -> None:
    doc = parse_text("word " * 40 + "\n\nmore", "notes/long-line.txt")
    assert doc.title == "long-line"


@pytest.mark.parametrize(
    ("name", "data", "title"),
    [
        ("a1b2c3.md", b"Some text without a heading.\n", "Client name"),
        ("a1b2c3.md", b"# Own heading\n\nText.\n", "Own heading"),
        ("a1b2c3.md", b"---\ntitle: Front matter\n---\nText.\n", "Front matter"),
        ("a1b2c3.txt", ("word " * 40 + "\n\nmore").encode(), "Client name"),
        ("a1b2c3.txt", b"Short first line\n\nBody.\n", "Short first line"),
    ],
)
def test_default_title_only_replaces_the_file_stem(name: str, data: bytes, title: str) -> None:
    doc = parse_file(Path(name), data, max_bytes=10_000, default_title="Client name")
    assert doc.title == title
    assert parse_file(Path(name), data, max_bytes=10_000).title in {title, "a1b2c3"}


# -- HTML -------------------------------------------------------------------------

PAGE = b"""<!doctype html>
<html><head><title>Guide &amp; Notes</title><style>p { color: red }</style></head>
<body>
<nav><a href="/">Home</a> menu</nav>
<h1>Getting Started</h1>
<p>Install the <b>package</b> first.<br>Then run it.</p>
<h2>Usage</h2>
<pre>ragline ingest docs/
ragline ask "what?"</pre>
<table>
  <thead><tr><th>Flag</th><th>Meaning</th></tr></thead>
  <tbody><tr><td>-v</td><td>verbose | loud</td></tr><tr><td>-q</td><td>quiet</td></tr></tbody>
</table>
<ul><li>one<ol><li>nested</li></ol></li><li>two</li></ul>
<h5>Small print</h5>
<div>Loose <em>text</em> in a div.<p>Inner paragraph.</p></div>
<script>alert("x")</script>
<footer>Copyright</footer>
</body></html>
"""


def test_html_body_blocks_and_paths() -> None:
    doc = parse_file(Path("site/guide.html"), PAGE, max_bytes=LIMIT)
    assert doc.title == "Guide & Notes"
    assert doc.format == "html"
    assert "menu" not in doc.body and "alert" not in doc.body and "Copyright" not in doc.body
    assert "color" not in doc.body
    got = [(b.kind, doc.body[b.start : b.end], b.heading_path) for b in doc.blocks]
    usage = ("Getting Started", "Usage")
    assert got == [
        (BlockKind.HEADING, "Getting Started", ("Getting Started",)),
        (BlockKind.PARAGRAPH, "Install the package first. Then run it.", ("Getting Started",)),
        (BlockKind.HEADING, "Usage", usage),
        (BlockKind.CODE, 'ragline ingest docs/\nragline ask "what?"', usage),
        (
            BlockKind.TABLE,
            "| Flag | Meaning |\n| --- | --- |\n| -v | verbose \\| loud |\n| -q | quiet |",
            usage,
        ),
        (BlockKind.LIST, "- one\n  1. nested\n- two", usage),
        (BlockKind.HEADING, "Small print", usage),
        (BlockKind.PARAGRAPH, "Loose text in a div.", usage),
        (BlockKind.PARAGRAPH, "Inner paragraph.", usage),
    ]
    assert [b.level for b in doc.blocks if b.kind is BlockKind.HEADING] == [1, 2, 5]
    assert doc.blocks[0].line == 5  # source line of the <h1>


def test_html_title_falls_back_to_h1_then_stem() -> None:
    assert parse_html("<h1>Only <i>Heading</i></h1><p>x</p>", "a.html").title == "Only Heading"
    assert parse_html("<p>no heading</p>", "dir/page.htm").title == "page"


def test_html_without_text_fails() -> None:
    with pytest.raises(IngestError, match="no text to index"):
        parse_file(Path("empty.html"), b"<html><script>x()</script></html>", max_bytes=LIMIT)


# -- PDF --------------------------------------------------------------------------


def test_pdf_pages_become_page_blocks(tmp_path: Path) -> None:
    data = make_pdf(
        [["Annual report 2023", "Revenue grew strongly."], ["Second page text."]],
        title="Annual Report",
    )
    doc = parse_file(tmp_path / "report.pdf", data, max_bytes=LIMIT)
    assert doc.format == "pdf"
    assert doc.title == "Annual Report"
    assert doc.metadata == {"pages": 2}  # reportlab's "anonymous" author is no author
    assert [b.kind for b in doc.blocks] == [BlockKind.PAGE, BlockKind.PAGE]
    assert [b.page for b in doc.blocks] == [1, 2]
    assert texts(doc) == ["Annual report 2023\nRevenue grew strongly.", "Second page text."]


def test_pdf_title_from_first_line_and_blank_pages_skipped(tmp_path: Path) -> None:
    data = make_pdf([["Quarterly Update", "Body line."], [], ["Third page."]])
    doc = parse_file(tmp_path / "q.pdf", data, max_bytes=LIMIT)
    assert doc.title == "Quarterly Update"
    assert [b.page for b in doc.blocks] == [1, 3]


def test_pdf_without_text_layer_fails(tmp_path: Path) -> None:
    buf = io.BytesIO()
    pdf = canvas.Canvas(buf)
    pdf.rect(50, 50, 200, 200, fill=1)
    pdf.showPage()
    pdf.save()
    with pytest.raises(IngestError, match="no text layer") as info:
        parse_file(tmp_path / "scan.pdf", buf.getvalue(), max_bytes=LIMIT)
    assert info.value.source == str(tmp_path / "scan.pdf")


def test_encrypted_pdf_fails(tmp_path: Path) -> None:
    data = make_pdf([["secret text"]], encrypt="hunter2")
    with pytest.raises(IngestError, match="encrypted PDF"):
        parse_file(tmp_path / "locked.pdf", data, max_bytes=LIMIT)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.7\n1 0 obj <<\ngarbage", "corrupt PDF"),
        (b"this is not a pdf at all", "not a PDF file"),
    ],
)
def test_corrupt_pdf_fails(tmp_path: Path, data: bytes, reason: str) -> None:
    with pytest.raises(IngestError, match=reason):
        parse_file(tmp_path / "bad.pdf", data, max_bytes=LIMIT)


def test_truncated_pdf_fails(tmp_path: Path) -> None:
    data = make_pdf([["Some words here."]])
    with pytest.raises(IngestError, match="corrupt PDF") as info:
        parse_file(tmp_path / "cut.pdf", data[: len(data) // 2], max_bytes=LIMIT)
    assert info.value.line is None
