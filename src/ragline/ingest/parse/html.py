"""HTML → :class:`ParsedDocument`: a Markdown-like body built from the DOM.

HTML has no usable source spans (entities, tags), so the body is text we build:
headings on their own lines, code kept verbatim, tables as pipe rows, lists as
``-``/``1.`` items, everything else as collapsed paragraphs. Blocks index into
that body, so the chunkers treat HTML exactly like Markdown.
"""

from __future__ import annotations

from pathlib import PurePath

from bs4 import BeautifulSoup
from bs4.element import CData, NavigableString, Tag

from ragline.ingest.parse.markdown import PATH_LEVELS
from ragline.types import Block, BlockKind, ParsedDocument

#: Page furniture and non-text elements: never part of the body.
DROPPED_TAGS = ("script", "style", "nav", "footer", "noscript", "template", "head", "title", "svg")
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_CONTAINERS = frozenset(
    {
        *("html", "body", "main", "article", "section", "div", "header", "aside"),
        *("figure", "figcaption", "form", "fieldset", "details", "summary", "li"),
        *("dl", "dt", "dd", "address", "center", "hgroup", "search"),
    }
)


def parse_html(html: str, source: str) -> ParsedDocument:
    """Parse with the stdlib ``html.parser`` backend (no lxml needed)."""
    soup = BeautifulSoup(html, "html.parser")
    title = _title(soup, source)
    for tag in soup.find_all(DROPPED_TAGS):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with("\n")
    builder = _BodyBuilder()
    builder.walk(soup.body if soup.body is not None else soup)
    builder.flush()
    return ParsedDocument(
        source=source,
        title=title,
        body="".join(builder.parts),
        blocks=tuple(builder.blocks),
        format="html",
    )


def _title(soup: BeautifulSoup, source: str) -> str:
    for tag in (soup.title, soup.find("h1")):
        if isinstance(tag, Tag) and (text := _collapse(tag.get_text())):
            return text
    return PurePath(source).stem


def _collapse(text: str) -> str:
    return " ".join(text.split())


class _BodyBuilder:
    """Appends blocks to the body text, separated by blank lines, recording spans."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.blocks: list[Block] = []
        self._pos = 0
        self._path: list[tuple[int, str]] = []
        self._inline: list[str] = []
        self._inline_line = 0

    def add(self, kind: BlockKind, text: str, line: int, level: int = 0) -> None:
        if not text.strip():
            return
        if kind is BlockKind.HEADING and level <= PATH_LEVELS:
            while self._path and self._path[-1][0] >= level:
                self._path.pop()
            self._path.append((level, text))
        if self.parts:
            self.parts.append("\n\n")
            self._pos += 2
        path = tuple(t for _, t in self._path)
        end = self._pos + len(text)
        self.blocks.append(Block(kind, self._pos, end, path, level=level, line=line))
        self.parts.append(text)
        self._pos = end

    def flush(self) -> None:
        """Emit the loose inline text gathered so far as one paragraph."""
        text = _collapse("".join(self._inline))
        self._inline.clear()
        self.add(BlockKind.PARAGRAPH, text, self._inline_line)

    def walk(self, parent: Tag) -> None:
        for child in parent.children:
            if isinstance(child, NavigableString):
                if type(child) in (NavigableString, CData):
                    if not self._inline:
                        self._inline_line = _line(parent)
                    self._inline.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            line = _line(child)
            if name in _HEADINGS:
                self.flush()
                self.add(BlockKind.HEADING, _collapse(child.get_text()), line, _HEADINGS[name])
            elif name == "p":
                self.flush()
                self.add(BlockKind.PARAGRAPH, _collapse(child.get_text()), line)
            elif name == "pre":
                self.flush()
                self.add(BlockKind.CODE, child.get_text().strip("\n").rstrip(), line)
            elif name == "table":
                self.flush()
                self.add(BlockKind.TABLE, _table_text(child), line)
            elif name in ("ul", "ol"):
                self.flush()
                self.add(BlockKind.LIST, "\n".join(_list_lines(child, 0)), line)
            elif name == "blockquote":
                self.flush()
                self.add(BlockKind.QUOTE, _collapse(child.get_text()), line)
            elif name == "hr":
                self.flush()
            elif name in _CONTAINERS:
                self.flush()
                self.walk(child)
                self.flush()
            else:  # inline element: its text joins the running paragraph
                if not self._inline:
                    self._inline_line = line
                self._inline.append(child.get_text())


def _line(tag: Tag) -> int:
    return tag.sourceline or 0


def _table_text(table: Tag) -> str:
    """Pipe rows, first row as the header, so tables read like Markdown ones."""
    rows: list[list[str]] = []
    for tr in table.find_all("tr"):
        found = tr.find_all(["th", "td"], recursive=False)
        cells = [_collapse(c.get_text()).replace("|", "\\|") for c in found]
        if cells:
            rows.append(cells)
    if not rows:
        return _collapse(table.get_text())
    width = max(len(r) for r in rows)
    lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in rows]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


def _list_lines(lst: Tag, depth: int) -> list[str]:
    lines: list[str] = []
    number = 1
    for li in lst.find_all("li", recursive=False):
        nested = [c.extract() for c in li.find_all(["ul", "ol"], recursive=False)]
        marker = f"{number}." if lst.name == "ol" else "-"
        text = _collapse(li.get_text())
        if text:
            lines.append(f"{'  ' * depth}{marker} {text}")
            number += 1
        for sub in nested:
            lines.extend(_list_lines(sub, depth + 1))
    return lines
