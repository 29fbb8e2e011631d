"""Site-generator markup (MkDocs/Material, Docusaurus/MDX, Sphinx/MyST, Hugo, GitHub)
is rendered to text before chunking: no chunk quotes it, its words stay, and explicit
heading ids still give chunk URLs their #anchor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragline.embed.tokenizer import TokenCounter
from ragline.engine import make_chunker
from ragline.ingest.parse import parse_file
from ragline.ingest.parse.markup import clean_markup
from ragline.ingest.records import build_chunks, explicit_anchors
from ragline.settings import Settings
from ragline.types import Chunk

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "generators"

#: Markup that must not reach a chunk's text (code spans and fences are not checked).
MARKUP = re.compile(
    r"\{\s*#|\{/\*|^\s*///|\{\*|\*\}|<img|<abbr|</?Tab|</?details|</?summary|<a\s|</a>|<kbd|"
    r"<br|<!--|^\s*:::|^\s*!!!|^\s*\?\?\?|^\s*===|```\{|\{(?:note|warning|tip|ref|doc|term)\}|"
    r":ref:|\{\{[<%]|[%>]\}\}|\[!(?:NOTE|WARNING|TIP)\]|--8<--|\]\(|&[a-z]+;|\*\*|"
    r"\{\s*[.:]|^import\s|^\(\S+\)=|:caption:|:maxdepth:|:language:",
    re.M,
)
CODE = re.compile(r"^\s*```.*?^\s*```|`[^`\n]+`", re.M | re.S)

#: Words of each fixture that must survive: admonition titles and bodies, tab
#: labels, abbreviations with their expansion, link and image text.
KEPT = {
    "mkdocs-material.md": [
        "Docker.",
        "API (Application Programming Interface)",
        "tokens & signed cookies",
        "Note: Technical details",
        "reads its configuration",
        "Warning: Heavy loads",
        "\nThe crane refuses containers",  # dedented: prose, not an indented code block
        "Python:",
        'crane.lift("box", tonnes=12)',
        "The crane on quay four",
    ],
    "docusaurus.mdx.md": [
        "Note: Lens care",
        "Danger: Mercury bath",
        "Oil lamp:",
        "needs its wick trimmed",
        "fog signal page",
    ],
    "sphinx-myst.md": [
        "see the calendar and\ntools",
        "the grafting guide covers",
        "Note:\nCut just above",
        "Warning: Fire blight",
        "Tip:\nA sharp bypass pruner",
        'log.append("cut")',
        "The scion is",
    ],
    "hugo.md": ["Wear a veil", "cool smoke calms", "capped with wax"],
    "github.md": [
        "> Note:\n> Life jackets",
        "> Warning:",
        "front desk or online.",
        "euros €",
        "See the map and the dock.",
        "Opening hours",
        "Use `<kbd>` tags only in code, like `**this**` and `[x](y)`.",
    ],
}
ANCHORS = {
    "mkdocs-material.md": {"deploying", "install-crane"},
    "sphinx-myst.md": {"pruning-basics"},
    "docusaurus.mdx.md": {"lighthouse-maintenance", "lamp-types"},
}


def chunks_of(path: Path, text: str | None = None) -> list[Chunk]:
    data = path.read_bytes() if text is None else text.encode()
    doc = parse_file(path, data, max_bytes=10**7)
    drafts = make_chunker(Settings(), TokenCounter()).chunk(doc)
    return build_chunks(
        doc,
        drafts,
        tenant="t",
        source=path.as_posix(),
        rel_path=path.name,
        chapter="c",
        base_url="https://docs.example.org",
        created_at="2026-01-01",
    )


def leftover_markup(chunks: list[Chunk]) -> list[str]:
    return [m.group() for c in chunks for m in MARKUP.finditer(CODE.sub("", c.text))]


@pytest.mark.parametrize("name", sorted(KEPT))
def test_no_chunk_quotes_generator_markup(name: str) -> None:
    chunks = chunks_of(FIXTURES / name)
    assert chunks
    assert leftover_markup(chunks) == []
    text = "\n".join(c.text for c in chunks)
    for kept in KEPT[name]:
        assert kept in text, (kept, text)
    doc = parse_file(FIXTURES / name, (FIXTURES / name).read_bytes(), max_bytes=10**7)
    assert set(explicit_anchors(doc).values()) == ANCHORS.get(name, set())


def test_an_explicit_heading_id_feeds_the_chunk_url() -> None:
    chunks = chunks_of(FIXTURES / "mkdocs-material.md")
    assert any(c.url.endswith("mkdocs-material.md#install-crane") for c in chunks)


def test_every_fixture_has_the_markup_it_tests() -> None:
    """Without the cleaning, the same files do carry the markup (the test is not vacuous)."""
    for name in KEPT:
        raw = (FIXTURES / name).read_text()
        assert MARKUP.search(CODE.sub("", raw)), name


def test_lines_keep_their_numbers() -> None:
    """A removed construct leaves an empty line, so errors still name the source line."""
    raw = (FIXTURES / "sphinx-myst.md").read_text()
    cleaned = clean_markup(raw)
    assert cleaned.text.count("\n") == raw.count("\n")
    assert cleaned.anchors == {3: "pruning-basics"}


def test_code_is_left_as_written() -> None:
    src = '# T\n\n```html\n<abbr title="x">y</abbr> **b** [l](u) {{< s >}}\n```\n'
    assert clean_markup(src).text == src


def test_prose_that_looks_like_markup_is_kept() -> None:
    src = (
        "Export the model to ONNX first.\nexport the vectors, then import the data.\n"
        "Prices rose from $5 to $7; a < b and c > d.\n"
    )
    assert clean_markup(src).text == src
    mdx = "import Tabs from '@theme/Tabs';\nexport const meta = {a: 1};\nText.\n"
    assert clean_markup(mdx).text == "\n\nText.\n"


#: One construct of each generator, with a word in it that must survive.
SNIPPETS = [
    "## Heading {w} {{ #id-{w} }}",
    "## Heading {w} {{#id-{w}}}",
    "/// note | Title {w}\n\nBody {w}.\n\n///",
    '!!! tip "Title {w}"\n    Body {w}.',
    "{{* ../../docs_src/{w}/tutorial001.py hl[3] *}}",
    '--8<-- "{w}.md"',
    '=== "Tab {w}"\n\n    Tab body {w}.',
    ":::note Title {w}\n\nBody {w}.\n\n:::",
    '<Tabs>\n  <TabItem value="{w}" label="Label {w}">\n\nBody {w}.\n\n  </TabItem>\n</Tabs>',
    "```{{note}}\nBody {w}.\n```",
    ":::{{warning}}\nBody {w}.\n:::",
    "See {{ref}}`the {w} page <label-{w}>` and :ref:`{w} <x>`.",
    "{{{{< hint info >}}}}\nBody {w}.\n{{{{< /hint >}}}}",
    "> [!NOTE]\n> Body {w}.",
    'An <abbr title="Long {w}">{w}</abbr> and <img src="a.png" alt="{w} picture">.',
    "**{w}** &amp; [{w}](https://example.org/{w}) and ![{w}](x.png)",
    "Some {w} text.<br>More {w}.",
]
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SNIPPETS), WORDS), min_size=1, max_size=12))
def test_property_no_chunk_text_contains_markup(parts: list[tuple[str, str]]) -> None:
    """Any mix of the generators' constructs: no markup token reaches a chunk."""
    body = "\n\n".join(snippet.format(w=word) for snippet, word in parts)
    chunks = chunks_of(Path("/docs/page.md"), f"# Page\n\nIntro text.\n\n{body}\n")
    assert leftover_markup(chunks) == []
