"""The how-to pairs the reader is trained on: headings become the questions they answer."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))

from howto_data import base_form, howto_pairs, question_for, sections

VOCAB = Counter({"update": 9, "set": 7, "add": 5, "pass": 4, "ad": 1, "sett": 0})
VERBS = {"update", "set", "add", "pass", "create"}

PAGE = """---
title: Updating Objects in State
---

<Intro>

State can hold any kind of JavaScript value, including objects.

</Intro>

## Updating a nested object {/*updating-a-nested-object*/}

Objects in state are read-only. To change a nested field, copy every object on the way
down with the spread syntax and replace the copy: `setPerson({...person, artwork: {...}})`.
That is how React sees the update and renders again with the new value of the field.

## Why is mutating state not recommended? {/*why-not-mutate*/}

Mutating state directly breaks time travel debugging and optimisations that rely on
comparing old and new objects. Treat every object in state as if it were frozen: make a
new object and set it, so React can tell what changed between two renders of a component.

```js
## not a heading: inside a code fence
```

## Recap {/*recap*/}

* Treat all state as read-only and copy objects before changing them in a new render.
"""


@pytest.mark.parametrize(
    ("gerund", "base"),
    [("updating", "update"), ("setting", "set"), ("adding", "add"), ("passing", "pass")],
)
def test_a_gerund_becomes_the_verb_the_corpus_uses(gerund: str, base: str) -> None:
    assert base_form(gerund, VOCAB) == base


@pytest.mark.parametrize(
    ("parent", "heading", "question"),
    [
        ("", "Updating a nested object", "How do I update a nested object?"),
        ("", "Step 2: Create the context", "How do I create the context?"),
        ("", "Why is mutating state not recommended?", "Why is mutating state not recommended?"),
        ("`useState(initialState)`", "Returns", "What does `useState` return?"),
        ("`useState(initialState)`", "Parameters", "What parameters does `useState` take?"),
        ("`memo(Component)`", "Caveats", "What are the caveats of `memo`?"),
        ("", "Recap", None),
        ("", "React DOM", None),
        ("", "Vite", None),
    ],
)
def test_a_heading_becomes_the_question_its_section_answers(
    parent: str, heading: str, question: str | None
) -> None:
    assert question_for(parent, heading, VOCAB, VERBS) == question


def test_sections_drop_mdx_tags_anchors_and_fenced_hashes() -> None:
    title, secs = sections(PAGE)
    assert title == "Updating Objects in State"
    headings = [h for _, h, _ in secs]
    assert headings == [
        "Updating a nested object",
        "Why is mutating state not recommended?",
        "Recap",
    ]
    body = secs[1][2]
    assert "## not a heading" in body and "{/*" not in body
    assert "<Intro>" not in secs[0][2] + title


def test_pairs_give_the_section_without_its_heading_and_same_page_negatives(
    tmp_path: Path,
) -> None:
    for i in range(4):  # the 4th page (sorted) is the test split
        (tmp_path / f"page{i}.md").write_text(PAGE, encoding="utf-8")
    rows = list(howto_pairs(tmp_path, random.Random(1)))
    pos = [r for r in rows if r["label"] == 1]
    neg = [r for r in rows if r["label"] == 0]
    assert {r["q"] for r in pos} == {
        "How do I update a nested object?",
        "Why is mutating state not recommended?",
    }
    assert not any("Updating a nested object" in str(r["p"]) for r in rows)
    assert all(str(r["p"]).startswith("Updating Objects in State\n") for r in rows)
    for r in neg:  # a negative is another section of the same page
        twin = next(p for p in pos if p["q"] == r["q"] and p["article"] == r["article"])
        assert r["p"] != twin["p"]
    assert Counter(str(r["split"]) for r in pos) == {"train": 6, "test": 2}


def test_another_apis_section_of_the_same_heading_is_a_negative(tmp_path: Path) -> None:
    body = "It gives back the value. " * 10
    other = "It gives back nothing at all. " * 10
    (tmp_path / "api.md").write_text(
        f"### `first()`\n\n#### Returns\n\n{body}\n\n### `second()`\n\n#### Returns\n\n{other}\n",
        encoding="utf-8",
    )
    rows = list(howto_pairs(tmp_path, random.Random(1)))
    neg = {(r["q"], r["p"]) for r in rows if r["label"] == 0}
    assert ("What does `first` return?", other.strip()) in neg
    assert ("What does `second` return?", body.strip()) in neg
