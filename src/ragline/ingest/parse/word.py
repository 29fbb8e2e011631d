"""Word processing files → :class:`ParsedDocument`: ``.docx`` with python-docx,
``.odt`` (OpenDocument) from its XML with the standard library.

Heading styles ("Heading 1"…, "Title") open sections, so chunks carry the heading
path; tables become pipe tables; list paragraphs (numbered or in a "List" style)
are gathered into one list block, indented by their level. A ``.docx`` has no
pages until a word processor lays it out, so its chunks have no page number.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any
from xml.etree import ElementTree

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.build import BodyBuilder, collapse, missing_extra
from ragline.types import BlockKind, ParsedDocument

_HEADING_STYLE = re.compile(r"heading\s*(\d)", re.IGNORECASE)
_PROPERTIES = ("author", "subject", "keywords", "category")


def parse_docx(data: bytes, source: str) -> ParsedDocument:
    """Raises :class:`IngestError` for a file that is not a readable ``.docx``."""
    try:
        import docx
        from docx.table import Table
        from docx.text.paragraph import Paragraph
    except ImportError as exc:
        raise missing_extra(source, ".docx", "office", exc) from exc
    try:
        document = docx.Document(io.BytesIO(data))
        items = list(document.iter_inner_content())
        props = document.core_properties
        meta_title = collapse(props.title or "")
        metadata: dict[str, Any] = {
            name: value for name in _PROPERTIES if (value := collapse(getattr(props, name) or ""))
        }
        builder = BodyBuilder()
        first_heading = ""
        list_lines: list[str] = []
        numbers: dict[int, int] = {}
        for item in items:
            if isinstance(item, Paragraph) and not _heading_level(item):
                marker = _list_marker(item, numbers)
                if marker is not None:
                    text = collapse(item.text)
                    if text:
                        list_lines.append(f"{marker} {text}")
                    continue
            if list_lines:
                builder.add(BlockKind.LIST, "\n".join(list_lines))
                list_lines, numbers = [], {}
            if isinstance(item, Table):
                builder.table([[cell.text for cell in row.cells] for row in item.rows])
                continue
            level = _heading_level(item)
            if level:
                builder.heading(item.text, level)
                first_heading = first_heading or collapse(item.text)
            else:
                builder.add(BlockKind.PARAGRAPH, item.text.strip())
        if list_lines:
            builder.add(BlockKind.LIST, "\n".join(list_lines))
    except IngestError:
        raise
    except Exception as exc:  # python-docx/lxml/zipfile raise many types for a bad file
        raise IngestError(source, None, f"corrupt .docx file: {exc}") from exc
    return builder.document(source, meta_title or first_heading, "docx", metadata)


def _style_name(paragraph: Any) -> str:
    style = paragraph.style
    return str(style.name or "") if style is not None else ""


def _heading_level(paragraph: Any) -> int:
    """1–6 for a heading paragraph ("Title" counts as level 1), else 0."""
    name = _style_name(paragraph)
    if name.lower() == "title":
        return 1
    m = _HEADING_STYLE.match(name)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else 0


def _list_marker(paragraph: Any, numbers: dict[int, int]) -> str | None:
    """The ``-`` or ``n.`` marker (indented by list level) of a list paragraph,
    or None for any other paragraph. Numbering restarts below a shallower item."""
    name = _style_name(paragraph).lower()
    ppr = paragraph._p.pPr
    numpr = ppr.numPr if ppr is not None else None
    if numpr is None and not name.startswith("list"):
        return None
    level = 0
    if numpr is not None and numpr.ilvl is not None:
        level = int(numpr.ilvl.val)
    elif (m := re.search(r"(\d)$", name)) is not None:
        level = int(m.group(1)) - 1
    for deeper in [k for k in numbers if k > level]:
        del numbers[deeper]
    indent = "  " * max(level, 0)
    if "number" in name:
        numbers[level] = numbers.get(level, 0) + 1
        return f"{indent}{numbers[level]}."
    return f"{indent}-"


_ODF = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
}


def _odf(tag: str) -> str:
    prefix, name = tag.split(":")
    return f"{{{_ODF[prefix]}}}{name}"


_H, _P, _LIST = _odf("text:h"), _odf("text:p"), _odf("text:list")
_TABLE, _ROW, _CELL = _odf("table:table"), _odf("table:table-row"), _odf("table:table-cell")
_SKIPPED = frozenset(
    {_odf("text:sequence-decls"), _odf("table:table-columns"), _odf("office:forms")}
)


def parse_odt(data: bytes, source: str) -> ParsedDocument:
    """OpenDocument text (LibreOffice ``.odt``), read from its ``content.xml`` with
    the standard library: ``text:h`` outline levels as headings, lists, tables.
    Raises :class:`IngestError` for a file that is not a readable ``.odt``."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            content = ElementTree.fromstring(z.read("content.xml"))
            meta = (
                ElementTree.fromstring(z.read("meta.xml")) if "meta.xml" in z.namelist() else None
            )
        body = content.find("office:body/office:text", _ODF)
        if body is None:
            raise ValueError("no office:text body in content.xml")
    except (zipfile.BadZipFile, KeyError, ValueError, ElementTree.ParseError) as exc:
        raise IngestError(source, None, f"corrupt .odt file: {exc}") from exc
    builder = BodyBuilder()
    first_heading = _odt_blocks(builder, body)
    metadata: dict[str, Any] = {}
    meta_title = ""
    if meta is not None:
        meta_title = collapse(meta.findtext("office:meta/dc:title", "", _ODF))
        if author := collapse(meta.findtext("office:meta/meta:initial-creator", "", _ODF)):
            metadata["author"] = author
    return builder.document(source, meta_title or first_heading, "odt", metadata)


def _odt_blocks(builder: BodyBuilder, parent: ElementTree.Element) -> str:
    """Blocks of a container (body, section); returns the first heading's title."""
    first = ""
    for el in parent:
        if el.tag == _H:
            title = collapse(_odt_text(el))
            builder.heading(title, int(el.get(_odf("text:outline-level"), "1") or 1))
            first = first or title
        elif el.tag == _P:
            builder.add(BlockKind.PARAGRAPH, _odt_text(el).strip())
        elif el.tag == _LIST:
            builder.add(BlockKind.LIST, "\n".join(_odt_list(el, 0)))
        elif el.tag == _TABLE:
            builder.table([[_odt_text(c) for c in row.iter(_CELL)] for row in el.iter(_ROW)])
        elif el.tag not in _SKIPPED:
            inner = _odt_blocks(builder, el)  # text:section and other containers
            first = first or inner
    return first


def _odt_list(lst: ElementTree.Element, depth: int) -> list[str]:
    lines: list[str] = []
    for item in lst.findall("text:list-item", _ODF):
        for child in item:
            if child.tag == _LIST:
                lines.extend(_odt_list(child, depth + 1))
            elif text := collapse(_odt_text(child)):
                lines.append(f"{'  ' * depth}- {text}")
    return lines


def _odt_text(el: ElementTree.Element) -> str:
    """An element's text with ``text:s`` (spaces), tabs and line breaks expanded."""
    parts = [el.text or ""]
    for child in el:
        if child.tag == _odf("text:s"):
            parts.append(" " * int(child.get(_odf("text:c"), "1") or 1))
        elif child.tag == _odf("text:tab"):
            parts.append("\t")
        elif child.tag == _odf("text:line-break"):
            parts.append("\n")
        elif child.tag != _odf("text:note"):
            parts.append(_odt_text(child))
        parts.append(child.tail or "")
    return "".join(parts)
