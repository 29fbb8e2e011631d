"""Input rules of the HTTP API and the MCP tools: text cleaned before it is measured,
limits from settings (one module below both, so neither imports the other).

HTML is stripped (tags dropped, ``script``/``style`` bodies dropped, entities decoded)
and whitespace collapsed *before* the length checks, so markup can neither smuggle a
long question past the limit nor make a short one look long.
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata
from dataclasses import dataclass
from pathlib import PurePath

from ragline.errors import InputError

#: Elements whose content is never text a person typed.
_DROPPED = frozenset({"script", "style", "template", "noscript"})
#: Control characters other than whitespace (they collapse anyway).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class RequestProblem(InputError, ValueError):
    """A request the API refuses: the HTTP status, a short code and the field at fault."""

    def __init__(
        self, message: str, *, field: str = "", status_code: int = 400, code: str = ""
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status_code = status_code
        self.code = code or {
            400: "invalid_request",
            401: "unauthorized",
            404: "not_found",
            413: "payload_too_large",
            429: "rate_limited",
            503: "unavailable",
        }.get(status_code, "error")


#: HTML element names: only these count as tags, so ``Vec<T>`` or ``List<String>`` in a
#: question about code are kept as typed.
_HTML_TAGS = frozenset(
    (
        "a",
        "abbr",
        "address",
        "area",
        "article",
        "aside",
        "audio",
        "b",
        "base",
        "bdi",
        "bdo",
        "blockquote",
        "body",
        "br",
        "button",
        "canvas",
        "caption",
        "cite",
        "code",
        "col",
        "colgroup",
        "data",
        "datalist",
        "dd",
        "del",
        "details",
        "dfn",
        "dialog",
        "div",
        "dl",
        "dt",
        "em",
        "embed",
        "fieldset",
        "figcaption",
        "figure",
        "font",
        "footer",
        "form",
        "frame",
        "frameset",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "head",
        "header",
        "hr",
        "html",
        "i",
        "iframe",
        "img",
        "input",
        "ins",
        "kbd",
        "label",
        "legend",
        "li",
        "link",
        "main",
        "map",
        "mark",
        "meta",
        "meter",
        "nav",
        "noscript",
        "object",
        "ol",
        "optgroup",
        "option",
        "output",
        "p",
        "param",
        "picture",
        "pre",
        "progress",
        "q",
        "rp",
        "rt",
        "ruby",
        "s",
        "samp",
        "script",
        "section",
        "select",
        "small",
        "source",
        "span",
        "strong",
        "style",
        "sub",
        "summary",
        "sup",
        "svg",
        "table",
        "tbody",
        "td",
        "template",
        "textarea",
        "tfoot",
        "th",
        "thead",
        "time",
        "title",
        "tr",
        "track",
        "u",
        "ul",
        "var",
        "video",
        "wbr",
    )
)
#: A start or end tag with well-formed attributes. ``[^<>]`` keeps every attempt within
#: the next angle bracket, so matching is linear in the input (Python's HTMLParser is
#: quadratic on unclosed markup: 40 KB of ``<a`` took seconds).
_TAG = re.compile(
    r"<(/?)([A-Za-z][A-Za-z0-9]*)"
    r"((?:\s+[^\s<>\"'=/]+(?:\s*=\s*(?:\"[^\"<>]*\"|'[^'<>]*'|[^\s<>\"'=`]+))?)*)\s*/?>"
)


def strip_html(text: str) -> str:
    """``text`` with HTML comments and tags removed (``script``/``style`` bodies too) and
    entities decoded; runs in linear time whatever the input.

    Only real element names count as tags, so ``a < b`` and ``Vec<T>`` are kept; an
    unclosed comment or script hides nothing: the rest is kept as text.
    """
    if "<" not in text and "&" not in text:
        return text
    parts: list[str] = []
    lower = text.lower()
    pos = 0
    n = len(text)
    while pos < n:
        lt = text.find("<", pos)
        if lt < 0:
            parts.append(text[pos:])
            break
        parts.append(text[pos:lt])
        if text.startswith("<!--", lt):
            close = text.find("-->", lt + 4)
            if close < 0:
                parts.append(text[lt:])
                break
            parts.append(" ")
            pos = close + 3
            continue
        m = _TAG.match(text, lt)
        if m is None or m.group(2).lower() not in _HTML_TAGS:
            parts.append("<")
            pos = lt + 1
            continue
        parts.append(" ")  # <p>a</p><p>b</p> → "a b", not "ab"
        pos = m.end()
        name = m.group(2).lower()
        if not m.group(1) and name in _DROPPED:
            close = lower.find(f"</{name}", pos)
            if close >= 0:
                end = lower.find(">", close)
                pos = n if end < 0 else end + 1
    return html.unescape("".join(parts))


def clean_text(text: str) -> str:
    """HTML stripped, control characters dropped, whitespace collapsed, NFC-normalised."""
    text = _CONTROL.sub(" ", strip_html(text))
    return unicodedata.normalize("NFC", " ".join(text.split()))


#: Raw text may be this many times a field's limit before cleaning: markup that
#: large is an attack, not a question, and refusing it first bounds the work.
MARKUP_FACTOR = 20


def is_unicode(text: str) -> bool:
    """False for a lone surrogate (JSON ``"\\ud800"``, a file name that is not UTF-8):
    no response body, tokenizer or database can carry it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_unicode(value: str, field: str) -> str:
    """``value`` when it is valid Unicode text; a lone surrogate (JSON ``"\\ud800"``)
    is not, and no tokenizer, hash or database can take it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestProblem(
            f"{field} is not valid Unicode text: a lone surrogate "
            f"(U+{ord(value[exc.start]):04X}) at character {exc.start}",
            field=field,
        ) from None
    return value


def clean_field(value: str, field: str, *, min_chars: int, max_chars: int) -> str:
    """``value`` cleaned (:func:`clean_text`) and length-checked, after refusing raw text
    over :data:`MARKUP_FACTOR` times the limit unread."""
    if len(value) > MARKUP_FACTOR * max_chars:
        raise RequestProblem(
            f"{field} is {len(value):,} characters long before cleaning; the limit is "
            f"{max_chars} characters of text",
            field=field,
        )
    check_unicode(value, field)
    return check_length(clean_text(value), field, min_chars=min_chars, max_chars=max_chars)


def check_length(value: str, field: str, *, min_chars: int, max_chars: int) -> str:
    """``value`` (already cleaned) when its length is within limits, else a 400 naming it."""
    n = len(value)
    if n < min_chars:
        raise RequestProblem(
            f"{field} must be at least {min_chars} characters after HTML and extra "
            f"whitespace are removed (got {n})",
            field=field,
        )
    if n > max_chars:
        raise RequestProblem(
            f"{field} is {n} characters long after cleaning; the limit is {max_chars}",
            field=field,
        )
    return value


def check_range(value: int, field: str, *, low: int, high: int) -> int:
    if not low <= value <= high:
        raise RequestProblem(f"{field} must be between {low} and {high}, got {value}", field=field)
    return value


@dataclass(frozen=True, slots=True)
class UploadName:
    """Where an upload is stored and what it was called: the client's name is metadata only."""

    stored: str  # "<sha256 of tenant and content, 32 hex><ext>": safe on every filesystem
    original: str  # the client's name, cleaned for display
    extension: str


def display_name(filename: str, max_chars: int = 200) -> str:
    """The client's file name for display: no folders, no control characters, bounded."""
    base = PurePath(filename.replace("\\", "/")).name
    base = _CONTROL.sub("", unicodedata.normalize("NFC", base)).strip()
    return base[:max_chars] or "upload"


def upload_name(
    filename: str, data: bytes, tenant: str, allowed_extensions: tuple[str, ...]
) -> UploadName:
    """The stored name of an upload, derived from its content (never from ``filename``),
    with the extension checked against ``allowed_extensions``."""
    original = display_name(filename)
    ext = PurePath(original).suffix.lower()
    allowed = {e.lower() for e in allowed_extensions}
    if ext not in allowed:
        raise RequestProblem(
            f"file type {ext or '(none)'!r} is not accepted; allowed: {', '.join(sorted(allowed))}",
            field="file",
            code="unsupported_file_type",
        )
    digest = hashlib.sha256(tenant.encode() + b"\0" + data).hexdigest()[:32]
    return UploadName(stored=f"{digest}{ext}", original=original, extension=ext)


#: Office and e-book formats: ZIP containers, whatever their contents.
ZIP_FORMATS = frozenset({".docx", ".pptx", ".xlsx", ".epub", ".odt"})


def check_upload_content(data: bytes, extension: str) -> None:
    """Refuse content that cannot be the type its extension claims (a 400 naming ``file``);
    the parser judges the rest when the file is ingested."""
    if not data:
        raise RequestProblem("the uploaded file is empty", field="file")
    if extension in ZIP_FORMATS:
        if not data.startswith(b"PK\x03\x04"):
            raise RequestProblem(
                f"the file is named {extension} but is not one (not a ZIP container)",
                field="file",
                code="unsupported_file_type",
            )
        return
    if extension == ".pdf":
        if not data.lstrip()[:5].startswith(b"%PDF-"):
            raise RequestProblem(
                "the file is named .pdf but is not a PDF",
                field="file",
                code="unsupported_file_type",
            )
        return
    if b"\x00" in data[:8192]:
        raise RequestProblem(
            f"the file is named {extension} but holds binary data",
            field="file",
            code="unsupported_file_type",
        )
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestProblem(
            f"the file is not UTF-8 text (byte {e.start})", field="file", code="bad_encoding"
        ) from None
