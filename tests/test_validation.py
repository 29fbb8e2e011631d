"""Input cleaning of the HTTP API: markup goes, code-like text stays, huge input is refused."""

from __future__ import annotations

import pytest

from ragline.validation import MARKUP_FACTOR, RequestProblem, clean_field, clean_text


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("<p>Hello <b>world</b></p>", "Hello world"),
        ("<p>a</p><p>b</p>", "a b"),
        ("<a href=\"x\" class=y data-k='v'>link</a> text", "link text"),
        ("<script>alert(1)</script>hi <style>p{}</style>there", "hi there"),
        ("x <!-- note --> y", "x y"),
        ("&amp; &lt;b&gt; caf&eacute;", "& <b> café"),
        ("<img src=x onerror=alert(1)>ok", "ok"),
        ("  many\n\n spaces\there  ", "many spaces here"),
    ],
)
def test_markup_is_removed(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean


@pytest.mark.parametrize(
    "text",
    ["a < b and c > d", "Vec<T> or List<String>", "x<y>z", "if (n<10) return", "<notatag>"],
)
def test_code_like_text_is_kept(text: str) -> None:
    assert clean_text(text) == text


def test_unclosed_markup_hides_nothing() -> None:
    assert clean_text("before <!-- never closed") == "before <!-- never closed"
    assert clean_text("<script>unclosed") == "unclosed"
    assert clean_text("<a" * 5) == "<a" * 5


def test_pathological_markup_is_cleaned_in_one_pass() -> None:
    # Python's HTMLParser needs minutes for these; the stripper is linear.
    assert clean_text("<!--" * 50_000).startswith("<!--<!--")
    assert clean_text("<a" * 200_000) == "<a" * 200_000
    assert clean_text("<div>" * 100_000 + "end") == "end"


def test_clean_field_refuses_huge_raw_input_before_cleaning() -> None:
    with pytest.raises(RequestProblem) as e:
        clean_field("<b>" * (MARKUP_FACTOR * 1000), "question", min_chars=3, max_chars=1000)
    assert e.value.field == "question" and e.value.status_code == 400
    assert clean_field("<b>why?</b>", "question", min_chars=3, max_chars=1000) == "why?"
    with pytest.raises(RequestProblem, match="at least 3"):
        clean_field("<b>a</b>", "question", min_chars=3, max_chars=1000)
