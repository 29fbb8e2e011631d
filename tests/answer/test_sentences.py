"""Sentence spans of textbook Markdown: prose split, code/maths/tables kept whole."""

from __future__ import annotations

from ragline.answer.sentences import (
    CODE,
    HEADING,
    MATH,
    PROSE,
    TABLE,
    clean_sentence,
    embed_key,
    prose_sentences,
    segments,
)

DOC = """# Linear Regression
:label:`sec_lr`

*Regression* problems pop up whenever we want
to predict a numerical value. Common examples include prices
(of homes, stocks, etc.), among others. Dr. Smith agrees, e.g. in Fig. 3 here.

```python
x = 1. + 2.
print(x)
```

$$y = Xw + b.
$$

| a | b |
|---|---|
| 1 | 2 |

* First item. It has two sentences.
* Second item
"""


def texts(kind: str) -> list[str]:
    return [DOC[s.start : s.end] for s in segments(DOC) if s.kind == kind]


def test_prose_is_split_into_sentences_across_wrapped_lines() -> None:
    prose = [" ".join(t.split()) for t in texts(PROSE)]
    assert prose == [
        "*Regression* problems pop up whenever we want to predict a numerical value.",
        "Common examples include prices (of homes, stocks, etc.), among others.",
        "Dr. Smith agrees, e.g. in Fig. 3 here.",
        "First item.",
        "It has two sentences.",
        "Second item",
    ]


def test_code_maths_tables_and_headings_are_single_segments() -> None:
    assert texts(CODE) == ["```python\nx = 1. + 2.\nprint(x)\n```"]
    assert texts(MATH) == ["$$y = Xw + b.\n$$"]
    assert texts(TABLE) == ["| a | b |", "|---|---|", "| 1 | 2 |"]
    assert texts(HEADING) == ["# Linear Regression"]


def test_spans_index_the_original_text() -> None:
    for s in segments(DOC):
        assert DOC[s.start : s.end].strip() == DOC[s.start : s.end]
        assert s.end > s.start
    assert [s.start for s in segments(DOC)] == sorted(s.start for s in segments(DOC))


def test_unclosed_fence_at_chunk_end_is_one_code_segment() -> None:
    text = "Some text here.\n```python\nx = 1\ny = 2"
    segs = segments(text)
    assert [s.kind for s in segs] == [PROSE, CODE]
    assert segs[-1].end == len(text)


def test_clean_sentence_removes_roles_links_and_brackets() -> None:
    raw = (
        "GANs :cite:`Goodfellow.2014` use a [two-sample test](https://x.org) as in "
        ":numref:`fig_gan`, see [1] and $x \\in [0, 1]$."
    )
    assert clean_sentence(raw) == (
        "GANs use a two-sample test as in the figure, see (1) and $x \\in [0, 1]$."
    )


def test_embed_key_ignores_final_punctuation_and_spacing() -> None:
    assert embed_key(" X  is\nY. ") == embed_key("X is Y") == "X is Y"


def test_prose_sentences_of_plain_text() -> None:
    text = "One sentence here. Another one follows! A third? Yes."
    assert [text[s.start : s.end] for s in prose_sentences(text)] == [
        "One sentence here.",
        "Another one follows!",
        "A third?",
        "Yes.",
    ]
