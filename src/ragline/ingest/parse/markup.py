"""Site-generator markup rendered to text before a Markdown file is parsed.

Documentation sites write Markdown for MkDocs/Material, Docusaurus/MDX,
Sphinx/MyST, Hugo or GitHub, whose extensions plain CommonMark reads as text:
``{ #anchor }`` heading ids, ``/// note`` / ``!!! note`` / ``:::note`` /
```` ```{note} ```` admonitions, ``{* ../../docs_src/x.py *}`` and ``--8<--``
includes, ``=== "Tab"`` and ``<Tabs>`` tabs, ``{{< shortcode >}}``, ``> [!NOTE]``
alerts, inline HTML (``<abbr title=…>``, ``<img>``), entities and link syntax.
Left in, they are embedded, matched by BM25 and quoted in answers (871 of 2,864
chunks of one site carried a heading id). Here they become what a reader of the
rendered page sees: an admonition its type and title as a line of text, an
abbreviation its text and expansion, a link its text; includes, tab and HTML
wrappers disappear.

The rewrite is pure and keeps every line where it was (a removed line becomes
empty, an admonition's indented body is dedented in place), so the parser's
line numbers still name the source line. Code (fences, indented code, inline
code spans) and front matter are left alone. Explicit heading ids are removed
from the text and returned by line, so chunk URLs keep their ``#anchor``.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<marks>`{3,}|~{3,})\s*(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<arg>.*)$")
#: MyST/Sphinx directives whose body is code (kept as a code fence of that language).
_CODE_DIRECTIVES = frozenset({"code-block", "code", "sourcecode", "code-cell"})
#: Directives that include or list other files: nothing of them is text.
_DROPPED_DIRECTIVES = frozenset(
    {"include", "literalinclude", "toctree", "image", "figure", "contents", "raw", "autofile"}
)
_COLON_FENCE = re.compile(
    r"^(?P<indent>\s*)(?P<marks>:{3,})\s*\{?(?P<name>[\w-]+)\}?\s*(?:\[(?P<bracket>[^\]]*)\])?"
    r"\s*(?P<title>.*?)\s*$"
)
_COLON_CLOSE = re.compile(r"^\s*:{3,}\s*$")
_SLASH_BLOCK = re.compile(r"^(?P<indent>\s*)///\s*(?P<name>[\w-]+)\s*(?:\|\s*(?P<title>.*?))?\s*$")
_SLASH_CLOSE = re.compile(r"^\s*///\s*$")
_BANG = re.compile(
    r"^(?P<indent>\s*)(?:!!!|\?\?\?\+?)\s*(?P<name>[\w-]+)(?:\s+[\w\s-]*?)?"
    r"(?:\s*\"(?P<title>[^\"]*)\")?\s*$"
)
_TAB = re.compile(r"^(?P<indent>\s*)===\+?\s*\"(?P<title>[^\"]*)\"\s*$")
_OPTION_LINE = re.compile(r"^\s*:[\w-]+:(?:\s.*)?$")  # MyST directive options (:class: x)
_INCLUDE_LINE = re.compile(
    r"^\s*(?:\{\*.*\*\}|\{!.*!\}|-{2}8<-{2}\s*\S.*|-{2}8<-{2}\s*)\s*$"  # FastAPI, mkdocs, snippets
)
_MDX_LINE = re.compile(  # MDX module lines; prose that starts "Export the model…" is kept
    r"^(?:import\s+(?:.+\s+from\s+)?['\"][^'\"]+['\"]|"
    r"export\s+(?:(?:const|let|var|default|function|async|class)\b|\{).*);?\s*$"
)
_ALERT = re.compile(r"^(?P<quote>\s*>\s*)\[!(?P<kind>[A-Za-z]+)\]\s*(?P<rest>.*)$")
_MYST_TARGET = re.compile(r"^\s*\((?P<id>[^()\s]+)\)=\s*$")  # (label)= before a heading
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_HEADING_ID = re.compile(r"\s*\{\s*(?:#(?P<id>[^}\s]+)[^}]*|/\*\s*(?P<mdx>[^*}]*?)\s*\*/)\s*\}\s*$")
#: Left as written: inline code spans and inline maths ($…$, $$…$$ on one line).
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1|\$\$[^$]+\$\$|(?<![\\$\w])\$[^$\s][^$]*?\$")
_ATTR_LIST = re.compile(r"(?:(?<=\s)|^)\{:?\s*[.#][\w-]+(?:\s+[^{}]*)?\s*\}")
_MDX_COMMENT = re.compile(r"\{/\*.*?\*/\}")
_HUGO = re.compile(r"\{\{[<%].*?[%>]\}\}")
_INCLUDE_INLINE = re.compile(r"\{\*.*?\*\}")
_HTML_COMMENT = re.compile(r"<!--.*?-->")
_ATTRS = r"(?:\s+[\w:.@-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|\{[^{}]*\}|[^\s\"'=<>`]+))?)*"
_ABBR = re.compile(r"<abbr" + r"(?P<attrs>" + _ATTRS + r")\s*>(?P<text>.*?)</abbr>", re.I)
_IMG = re.compile(r"<img" + r"(?P<attrs>" + _ATTRS + r")\s*/?>", re.I)
_TAB_ITEM = re.compile(r"<TabItem(?P<attrs>" + _ATTRS + r")\s*/?>")
_TAG = re.compile(r"</?[A-Za-z][\w.-]*" + _ATTRS + r"\s*/?>")
_ATTR = re.compile(r"([\w:-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|\{['\"]([^'\"]*)['\"]\})")
_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")
_REF_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\[[^\]]*\]")
_D2L_SLIDE_MARK = re.compile(r"\[\*\*(.+?)\*\*\]")  # d2l marks slide text as [**…**]
_RAW_OPEN = re.compile(r"^\s*<(?P<tag>script|style)\b", re.I)
_SELF_CLOSING = re.compile(r"^\s*<(?:script|style)\b[^>]*/>", re.I)
_BOLD = re.compile(r"(\*\*|__)(?=\S)(?P<text>.+?)(?<=\S)\1")
#: MyST ``{role}`text <target>``` and Sphinx ``:role:`text <target>```; d2l's own
#: :label:, :eqlabel:, :numref:, :eqref: and :cite: are its parser's business.
_MYST_ROLE = re.compile(r"\{(?P<role>[\w:.-]+)\}`(?P<body>[^`]*)`")
_SPHINX_ROLE = re.compile(
    r":(?P<role>ref|doc|term|class|func|meth|mod|attr|obj|data|exc|kbd|abbr|download|"
    r"guilabel|menuselection|command|file|program|option|envvar|py:\w+|std:\w+):"
    r"`(?P<body>[^`]*)`"
)


@dataclass(slots=True)
class Cleaned:
    """The rewritten text and the explicit heading ids taken out of it, by line (0-based)."""

    text: str
    anchors: dict[int, str] = field(default_factory=dict)


def _title_line(indent: str, name: str, title: str | None) -> str:
    """An admonition header as a reader sees it: ``Note: Title`` (or the title alone
    for a generic ``admonition``/``details``)."""
    label = name.replace("-", " ").replace("_", " ").strip().capitalize()
    title = (title or "").strip().strip("\"'")
    if label.lower() in ("admonition", "details", "tab", "tab item") and title:
        return f"{indent}{title}"
    return f"{indent}{label}: {title}" if title else f"{indent}{label}:"


def _role(match: re.Match[str]) -> str:
    body = match.group("body")
    text_target = re.match(r"^(?P<text>.*?)\s*<(?P<target>[^>]*)>$", body, re.S)
    if text_target:
        return text_target.group("text") or text_target.group("target")
    return body.lstrip("~!")


def _attrs(text: str) -> dict[str, str]:
    return {
        m.group(1).lower(): next(g for g in m.groups()[1:] if g is not None)
        for m in _ATTR.finditer(text)
    }


def _abbr(match: re.Match[str]) -> str:
    title = _attrs(match.group("attrs")).get("title", "")
    text = match.group("text")
    return f"{text} ({title})" if title and title != text else text


def _img(match: re.Match[str]) -> str:
    return _attrs(match.group("attrs")).get("alt", "")


def _tab_item(match: re.Match[str]) -> str:
    attrs = _attrs(match.group("attrs"))
    label = attrs.get("label") or attrs.get("value") or ""
    return f"{label}:" if label else ""


def clean_inline(text: str) -> str:
    """One line's prose rendered to text; inline code spans are left as written."""
    # roles first: their body is in backticks, which would read as a code span
    text = _SPHINX_ROLE.sub(_role, _MYST_ROLE.sub(_role, text))
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_clean_prose(text[pos : m.start()]))
        out.append(m.group())
        pos = m.end()
    out.append(_clean_prose(text[pos:]))
    return "".join(out)


def _clean_prose(s: str) -> str:
    if not s:
        return s
    s = _MDX_COMMENT.sub("", s)
    s = _HTML_COMMENT.sub("", s)
    s = _HUGO.sub("", s)
    s = _INCLUDE_INLINE.sub("", s)
    s = _ATTR_LIST.sub("", s)
    s = _ABBR.sub(_abbr, s)
    s = _IMG.sub(_img, s)
    s = _TAB_ITEM.sub(_tab_item, s)
    s = re.sub(r"<br\s*/?>", " ", s, flags=re.I)
    s = _TAG.sub("", s)
    s = _IMAGE.sub(lambda m: m.group("alt"), s)
    s = _LINK.sub(lambda m: m.group("text"), s)
    s = _REF_LINK.sub(lambda m: m.group("text"), s)
    s = _D2L_SLIDE_MARK.sub(r"\1", s)
    s = _BOLD.sub(lambda m: m.group("text"), s)
    if "&" in s:
        s = html.unescape(s)
    return s


def clean_markup(text: str) -> Cleaned:
    """``text`` (a Markdown file, newlines normalised) with generator markup rendered
    to text, line for line; see the module docstring."""
    lines = text.split("\n")
    out: list[str] = []
    anchors: dict[int, str] = {}
    fence: str | None = None  # the open code fence's marks
    dropping: str | None = None  # the fence of an include-like directive being removed
    directives: list[str] = []  # fences of open MyST admonitions
    indents: list[int] = []  # body indents of open !!! admonitions and === tabs
    options = False  # just after a directive's opening line (its :option: lines)
    target = ""  # a MyST (label)= waiting for its heading
    raw: str | None = None  # the closing tag of a <script> or <style> being removed
    math = False  # inside display maths opened by a $$ line
    front = bool(lines) and lines[0].strip() == "---"
    for i, line in enumerate(lines):
        if front:
            out.append(line)
            if i > 0 and line.strip() in ("---", "..."):
                front = False
            continue
        if dropping is not None:
            closing = _FENCE.match(line)
            if closing and closing.group("marks").startswith(dropping) and not closing["info"]:
                dropping = None
            out.append("")
            continue
        # the body of an indented admonition or tab: dedent it by one level
        while indents and line.strip() and len(line) - len(line.lstrip(" ")) < indents[-1]:
            indents.pop()
        if indents and line.strip():
            line = line[4:]
        if options:
            if _OPTION_LINE.match(line):
                out.append("")
                continue
            options = False
        if fence is not None:
            closing = _FENCE.match(line)
            if closing and closing.group("marks").startswith(fence) and not closing["info"]:
                fence = None
            out.append(line)
            continue
        if math or line.count("$$") % 2:  # display maths: left as written
            math ^= line.count("$$") % 2 == 1
            out.append(line)
            continue
        if raw is not None or (opened := _RAW_OPEN.match(line)):
            if raw is None and opened:
                raw = None if _SELF_CLOSING.search(line) else f"</{opened['tag'].lower()}>"
            if raw is not None and raw in line.lower():
                raw = None
            out.append("")
            continue
        if directives and line.strip() == directives[-1]:
            directives.pop()
            out.append("")
            continue
        opening = _FENCE.match(line)
        if opening:
            marks, info = opening.group("marks"), opening.group("info").strip()
            directive = _DIRECTIVE.match(info)
            if directive is None:
                fence = marks
                out.append(line)
                continue
            name = directive.group("name").lower()
            if name in _CODE_DIRECTIVES:
                fence = marks
                out.append(f"{opening['indent']}{marks}{directive.group('arg').split(' ')[0]}")
                options = True
            elif name in _DROPPED_DIRECTIVES:
                dropping = marks
                out.append("")
            else:
                directives.append(marks)
                out.append(_title_line(opening["indent"], name, directive.group("arg")))
                options = True
            continue
        if _COLON_CLOSE.match(line) or _SLASH_CLOSE.match(line):
            out.append("")
            continue
        colon = _COLON_FENCE.match(line)
        slash = _SLASH_BLOCK.match(line)
        bang = _BANG.match(line)
        tab = _TAB.match(line)
        if colon:
            title = colon.group("bracket") or colon.group("title")
            out.append(_title_line(colon["indent"], colon["name"], title))
            options = True
        elif slash:
            out.append(_title_line(slash["indent"], slash["name"], slash["title"]))
        elif bang:
            out.append(_title_line(bang["indent"], bang["name"], bang["title"]))
            indents.append(len(bang["indent"]) + 4)
        elif tab:
            out.append(f"{tab['indent']}{tab['title']}:")
            indents.append(len(tab["indent"]) + 4)
        elif _INCLUDE_LINE.match(line) or _MDX_LINE.match(line):
            out.append("")
        elif target_line := _MYST_TARGET.match(line):
            target = target_line["id"]
            out.append("")
        else:
            alert = _ALERT.match(line)
            if alert:
                kind = alert["kind"].capitalize()
                line = f"{alert['quote']}{kind}: {alert['rest']}".rstrip()
            if _HEADING.match(line):
                heading_id = _HEADING_ID.search(line)
                if heading_id:
                    anchors[i] = heading_id["id"] or heading_id["mdx"]
                    line = line[: heading_id.start()]
                elif target:
                    anchors[i] = target
                target = ""
            out.append(clean_inline(line))
    return Cleaned("\n".join(out), anchors)
