"""Markdown → :class:`ParsedDocument` via the markdown-it-py AST.

Top-level tokens carry ``.map`` line ranges; turning those into character spans
of the body gives every block its exact source text, which is what lets the
chunkers prove that no character is lost. Structure the AST does not capture
the way a textbook means it is patched here, on spans, not on text:

* display maths (``$$ … $$`` on its own lines) may interrupt a paragraph, as
  d2l-en writes it, and absorbs the ``:eqlabel:`…``` lines that follow it;
* a heading absorbs the d2l ``:label:`…``` lines right below it;
* text that yields no token (link reference definitions) becomes a paragraph,
  so the blocks cover every non-whitespace character of the body.
"""

from __future__ import annotations

import datetime as dt
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePath
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.token import Token
from mdit_py_plugins.amsmath import amsmath_plugin
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.dollarmath.index import math_block_dollar
from mdit_py_plugins.front_matter import front_matter_plugin

from ragline.ingest.errors import IngestError
from ragline.ingest.parse.markup import clean_markup
from ragline.ingest.spans import lstrip_span, rstrip_span
from ragline.types import Block, BlockKind, ParsedDocument

#: Heading levels that open a section and enter ``heading_path``; H5/H6 are content.
PATH_LEVELS = 4

_KIND_BY_TOKEN: dict[str, BlockKind] = {
    "heading_open": BlockKind.HEADING,
    "paragraph_open": BlockKind.PARAGRAPH,
    "fence": BlockKind.CODE,
    "code_block": BlockKind.CODE,
    "table_open": BlockKind.TABLE,
    "bullet_list_open": BlockKind.LIST,
    "ordered_list_open": BlockKind.LIST,
    "math_block": BlockKind.MATH,
    "math_block_label": BlockKind.MATH,
    "amsmath": BlockKind.MATH,
    "blockquote_open": BlockKind.QUOTE,
    "html_block": BlockKind.HTML,
    "hr": BlockKind.RULE,
}

_EQLABEL_LINE = re.compile(r"[ \t]*:eqlabel:`[^`\n]*`[ \t]*(?:\n|$)")
_LABEL_LINE = re.compile(r"[ \t]*:label:`[^`\n]*`[ \t]*(?:\n|$)")
# Explicit heading ids: Pandoc/kramdown ``{#id}`` / ``{ #id }`` and MDX ``{/*id*/}`` (react.dev).
_ANCHOR = re.compile(r"\s*\{\s*(?:#([^}\s]*)|/\*\s*([^*}]*?)\s*\*/)\s*\}\s*$")
_D2L_SLIDE_MARK = re.compile(r"\[\*\*(.+?)\*\*\]")  # d2l marks slide text as [**…**]
_SPACES = re.compile(r"\s+")

BlockRule = Callable[[StateBlock, int, int, bool], bool]


def _can_interrupt(rule: BlockRule) -> BlockRule:
    """Make a block rule usable as a paragraph terminator.

    Terminators are called with ``silent=True`` and must not emit tokens, but the
    dollarmath block rule ignores ``silent``; run it for real and roll back.
    """

    def wrapped(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
        if not silent:
            return rule(state, start_line, end_line, False)
        n_tokens, line = len(state.tokens), state.line
        found = rule(state, start_line, end_line, False)
        del state.tokens[n_tokens:]
        state.line = line
        return found

    return wrapped


@lru_cache(maxsize=1)
def markdown_parser() -> MarkdownIt:
    """CommonMark + tables + YAML front matter + ``$``/``$$`` maths + amsmath."""
    md = (
        MarkdownIt("commonmark", {"html": True})
        .enable("table")
        .use(front_matter_plugin)
        .use(dollarmath_plugin, allow_blank_lines=False)
        .use(amsmath_plugin)
    )
    md.block.ruler.at(
        "math_block",
        _can_interrupt(math_block_dollar(allow_labels=True, allow_blank_lines=False)),
        {"alt": ["paragraph", "reference", "blockquote", "list"]},
    )
    return md


@dataclass(slots=True)
class _Span:
    """A block under construction (mutable until the patches are done)."""

    kind: BlockKind
    start: int
    end: int
    level: int = 0
    title: str = ""
    anchor: str = ""


def parse_markdown(text: str, source: str) -> ParsedDocument:
    """Parse Markdown source; ``body`` is the text without its front matter.

    Raises :class:`IngestError` (with the file line) for front matter that is not
    valid YAML or not a mapping.
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    cleaned = clean_markup(text)  # site-generator markup to text, line for line
    text = cleaned.text
    md = markdown_parser()
    tokens = md.parse(text)
    line_starts = _line_starts(text)

    metadata: dict[str, Any] = {}
    body_offset = 0
    spans: list[_Span] = []
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.nesting == -1 or tok.map is None:
            continue
        if tok.type == "front_matter":
            metadata = _front_matter(tok.content, source)
            body_offset = _offset(line_starts, tok.map[1], len(text))
            continue
        kind = _KIND_BY_TOKEN.get(tok.type, BlockKind.PARAGRAPH)
        start = _offset(line_starts, tok.map[0], len(text))
        end = rstrip_span(text, start, _offset(line_starts, tok.map[1], len(text)))
        if end <= start:
            continue
        span = _Span(kind, start, end)
        if kind is BlockKind.HEADING:
            span.level = int(tok.tag[1:])
            span.title = heading_title(tokens[i + 1].content)
            span.anchor = cleaned.anchors.get(tok.map[0]) or heading_anchor(tokens[i + 1].content)
        spans.append(span)

    spans = _absorb_label_lines(text, spans)
    spans = _fill_gaps(text, body_offset, spans)
    body = text[body_offset:]
    blocks = _blocks(spans, body_offset, line_starts)
    title = _title(metadata, spans, source)
    return ParsedDocument(
        source=source, title=title, body=body, blocks=blocks, metadata=metadata, format="markdown"
    )


def heading_anchor(inline_source: str) -> str:
    """The heading's explicit id (``{#id}``, ``{ #id }``, ``{/*id*/}``), or ``""``.

    Translated docs keep the English id, so links into every language agree.
    """
    m = _ANCHOR.search(inline_source)
    return (m.group(1) or m.group(2) or "") if m else ""


def heading_title(inline_source: str) -> str:
    """Plain text of a heading: no ``{#anchor}``, no emphasis/link/code markup."""
    src = _ANCHOR.sub("", inline_source)
    src = _D2L_SLIDE_MARK.sub(r"\1", src)
    parsed = markdown_parser().parseInline(src)
    children = parsed[0].children if parsed and parsed[0].children else []
    return _SPACES.sub(" ", _plain(children)).strip()


def _plain(tokens: list[Token]) -> str:
    parts: list[str] = []
    for tok in tokens:
        if tok.type in ("text", "code_inline", "math_inline", "math_inline_double"):
            parts.append(tok.content)
        elif tok.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif tok.type == "image":
            parts.append(_plain(tok.children or []))
    return "".join(parts)


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: ``*name`` is refused, so a few hundred bytes of nested
    aliases (a "billion laughs" bomb) cannot expand into gigabytes of metadata."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not allowed in front matter", event.start_mark
            )
        return super().compose_node(parent, index)


def _front_matter(content: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.load(content, Loader=_NoAliasLoader)  # a SafeLoader without aliases
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # +2: the opening "---" line, and 1-based lines.
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise IngestError(source, line, f"broken front matter: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise IngestError(
            source,
            1,
            f"front matter must be a YAML mapping of key: value lines, got {type(data).__name__}",
        )
    return {str(k): _jsonable(v) for k, v in data.items()}


def _jsonable(value: Any) -> Any:
    """YAML dates and odd keys made JSON-safe, since metadata is stored as JSON. A
    timestamp is written in UTC (``+00:00``; a naive one is read as UTC) so that
    metadata filters compare timestamps in their text order (docs/search.md)."""
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return stamp.astimezone(dt.UTC).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    return value


def _absorb_label_lines(text: str, spans: list[_Span]) -> list[_Span]:
    """Glue d2l ``:eqlabel:`` lines to their maths and ``:label:`` lines to headings."""
    out: list[_Span] = []
    for span in spans:
        prev = out[-1] if out else None
        if prev is not None and span.start <= prev.end:
            # Its head was absorbed by the previous block: keep only the rest.
            span.start = lstrip_span(text, prev.end, span.end)
            if span.start >= span.end:
                continue
        out.append(span)
        if span.kind is BlockKind.MATH:
            span.end = _extend_over(text, span.end, _EQLABEL_LINE)
        elif span.kind is BlockKind.HEADING:
            span.end = _extend_over(text, span.end, _LABEL_LINE)
    return out


def _extend_over(text: str, end: int, line_re: re.Pattern[str]) -> int:
    """Move ``end`` over the directly following lines (no blank line) matching ``line_re``."""
    if not text.startswith("\n", end):
        return end
    new_end = end
    pos = end + 1
    while m := line_re.match(text, pos):
        new_end = rstrip_span(text, pos, m.end())
        pos = m.end()
        if not m.group().endswith("\n"):
            break
    return new_end


def _fill_gaps(text: str, body_offset: int, spans: list[_Span]) -> list[_Span]:
    """Wrap text between blocks (e.g. link reference definitions) in paragraphs."""
    out: list[_Span] = []
    pos = body_offset
    for span in [*spans, _Span(BlockKind.PARAGRAPH, len(text), len(text))]:
        gap_start = lstrip_span(text, pos, span.start)
        if gap_start < span.start:
            out.append(
                _Span(BlockKind.PARAGRAPH, gap_start, rstrip_span(text, gap_start, span.start))
            )
        if span.end > span.start:
            out.append(span)
        pos = max(pos, span.end)
    return out


def _blocks(spans: list[_Span], body_offset: int, line_starts: list[int]) -> tuple[Block, ...]:
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []  # (level, title) of the H1–H4 in force
    for span in spans:
        if span.kind is BlockKind.HEADING and span.level <= PATH_LEVELS:
            while path and path[-1][0] >= span.level:
                path.pop()
            path.append((span.level, span.title))
        blocks.append(
            Block(
                kind=span.kind,
                start=span.start - body_offset,
                end=span.end - body_offset,
                heading_path=tuple(t for _, t in path),
                level=span.level,
                line=bisect_right(line_starts, span.start),
                anchor=span.anchor if span.level <= PATH_LEVELS else "",
            )
        )
    return tuple(blocks)


def _title(metadata: dict[str, Any], spans: list[_Span], source: str) -> str:
    fm_title = metadata.get("title")
    if isinstance(fm_title, str | int | float) and str(fm_title).strip():
        return str(fm_title).strip()
    for span in spans:
        if span.kind is BlockKind.HEADING and span.level == 1 and span.title:
            return span.title
    return PurePath(source).stem


def _line_starts(text: str) -> list[int]:
    starts = [0]
    find = text.find
    pos = find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = find("\n", pos + 1)
    return starts


def _offset(line_starts: list[int], line: int, length: int) -> int:
    return line_starts[line] if line < len(line_starts) else length
