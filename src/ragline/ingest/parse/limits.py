"""Bounds on the work one file may cause, checked before and while it is parsed.

A file of a few kilobytes can ask a parser for gigabytes: a zip member that
inflates a thousandfold (Office files and EPUBs are zip archives), or a sheet
that declares a million rows of sixteen thousand columns. These checks refuse
such a file with an :class:`IngestError` naming it and the limit, so it fails
alone, like any bad file, and nothing already stored is touched.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from ragline.ingest.errors import IngestError

#: Defaults of the settings of the same names (see docs/configuration.md for why).
DEFAULT_MAX_UNPACKED_BYTES = 256 * 1024 * 1024
DEFAULT_MAX_UNPACK_RATIO = 500
DEFAULT_MAX_SHEET_CELLS = 200_000
DEFAULT_MAX_MARKDOWN_LINES = 200_000
DEFAULT_MAX_PDF_PAGES = 5_000
DEFAULT_MAX_HTML_TAGS = 200_000
#: Members this small are never judged by their ratio: a few kilobytes of
#: repeated XML (an empty style table) legitimately compress very well.
RATIO_FLOOR_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """The limits :func:`~ragline.ingest.parse.parse_file` enforces beyond file size."""

    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED_BYTES
    max_unpack_ratio: int = DEFAULT_MAX_UNPACK_RATIO
    max_sheet_cells: int = DEFAULT_MAX_SHEET_CELLS
    max_markdown_lines: int = DEFAULT_MAX_MARKDOWN_LINES
    max_pdf_pages: int = DEFAULT_MAX_PDF_PAGES
    max_html_tags: int = DEFAULT_MAX_HTML_TAGS

    def key(self) -> str:
        """The limits as text, for remembering which limits judged a failed file."""
        return (
            f"max_unpacked_bytes={self.max_unpacked_bytes};"
            f"max_unpack_ratio={self.max_unpack_ratio};"
            f"max_sheet_cells={self.max_sheet_cells};"
            f"max_markdown_lines={self.max_markdown_lines};"
            f"max_pdf_pages={self.max_pdf_pages};"
            f"max_html_tags={self.max_html_tags}"
        )


def check_archive(data: bytes, source: str, limits: ParseLimits) -> None:
    """Refuse a zip archive whose members declare more than ``max_unpacked_bytes``
    in all, or one member (over 1 MiB) that inflates more than ``max_unpack_ratio``
    times.

    The declared sizes are what bound the parsers: Python's zipfile (which
    openpyxl, python-docx, python-pptx and ebooklib read through) never returns
    more than a member's declared size, so a member that lies is cut short and
    fails its CRC check rather than growing. A file that is not a zip archive
    passes: its parser reports it as corrupt.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = z.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return
    total = 0
    for info in members:
        total += info.file_size
        if total > limits.max_unpacked_bytes:
            raise IngestError(
                source,
                None,
                f"zip archive unpacks to more than {limits.max_unpacked_bytes:,} bytes "
                f"(member {info.filename!r} declares {info.file_size:,}; "
                "RAGLINE_MAX_UNPACKED_BYTES): refused as a possible zip bomb",
            )
        if info.file_size > RATIO_FLOOR_BYTES:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_unpack_ratio:
                raise IngestError(
                    source,
                    None,
                    f"zip member {info.filename!r} inflates {ratio:,.0f} times "
                    f"({info.compress_size:,} to {info.file_size:,} bytes), over the limit "
                    f"of {limits.max_unpack_ratio} (RAGLINE_MAX_UNPACK_RATIO): refused as a "
                    "possible zip bomb",
                )


def check_cells(source: str, what: str, cells: int, limits: ParseLimits) -> None:
    """Refuse a table (sheet, CSV) of more than ``max_sheet_cells`` cells, empty
    ones included: each becomes a string and a padded pipe-table cell."""
    if cells > limits.max_sheet_cells:
        raise IngestError(
            source,
            None,
            f"{what} has more than {limits.max_sheet_cells:,} cells "
            "(RAGLINE_MAX_SHEET_CELLS); split the file or raise the limit",
        )


def check_lines(source: str, text: str, limits: ParseLimits) -> None:
    """Refuse Markdown of more than ``max_markdown_lines`` lines before it is
    parsed: the parser's time and memory grow with lines (a million one-line
    headings took minutes and gigabytes), and counting them is cheap."""
    lines = text.count("\n") + 1
    if lines > limits.max_markdown_lines:
        raise IngestError(
            source,
            None,
            f"Markdown file has {lines:,} lines, over the limit of "
            f"{limits.max_markdown_lines:,} (RAGLINE_MAX_MARKDOWN_LINES)",
        )


def check_tags(source: str, html: str, limits: ParseLimits) -> None:
    """Refuse HTML with more than ``max_html_tags`` tags (``<`` counted, an upper
    bound) before it is parsed: building the tree costs per element (a million
    nested ``<div>`` took 27 CPU-seconds, then failed on the nesting)."""
    tags = html.count("<")
    if tags > limits.max_html_tags:
        raise IngestError(
            source,
            None,
            f"HTML file has {tags:,} tags, over the limit of {limits.max_html_tags:,} "
            "(RAGLINE_MAX_HTML_TAGS)",
        )
