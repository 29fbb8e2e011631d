"""The reader as the judge, end to end on a real index (real embedder, real reader)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragline.answer.candidates import Candidate
from ragline.answer.reading import BlockVerdict, ReaderBars, sentence_ranges, why_not_read
from ragline.engine import Ragline

ORCHARD = """# Quillby orchard: summer care

The rows are mulched in spring to keep the soil cool.

The drip line drips 4 litres per tree each evening in July, and twice that in a heatwave.

Netting goes over the cherries in June.
"""

CORS = """# Middleware

## Cross-origin requests

Browsers block a page from reading responses of a server on another origin unless that
server says it may. Add `CORSMiddleware` to the application and list the origins that may
call it in `allow_origins`, for example `["https://app.example.com"]`; set
`allow_credentials=True` when cookies must be sent.
"""

CRITERION = """# Gearbox inspection

## Tollmann criterion

The Tollmann criterion states that a gearbox must be overhauled once its oil holds more
than 40 particles per millilitre.
"""

HOLIDAYS = """# Team handbook

Every team member gets 25 paid holidays a year, booked in the planning tool.
"""


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {
        "orchard.md": ORCHARD,
        "cors.md": CORS,
        "gearbox.md": CRITERION,
        "handbook.md": HOLIDAYS,
    }.items():
        (docs / name).write_text(text, encoding="utf-8")
    return docs


@pytest.fixture
def rag(make_rag: Callable[..., Ragline], docs: Path) -> Ragline:
    """The default judge (evidence check and reader together)."""
    r = make_rag()
    r.ingest(docs)
    return r


@pytest.fixture
def reader_rag(make_rag: Callable[..., Ragline], docs: Path, tmp_path: Path) -> Ragline:
    """The reader alone (``judge=reader``): no word rule refuses."""
    r = make_rag(index=tmp_path / "reader-index", judge="reader")
    r.ingest(docs)
    return r


def test_the_orchard_question_is_answered_with_the_number(reader_rag: Ragline) -> None:
    a = reader_rag.ask("How much water does the Quillby orchard get per tree in July?")
    assert not a.fallback, a.confidence.reason
    assert "4 litres" in a.text.split("[")[0]  # the lead sentence holds the figure
    assert "reader" in a.confidence.reason


def test_the_default_judge_answers_the_orchard_question_too(rag: Ragline) -> None:
    """judge=both: "How much water" is answered by a quantity in a unit ("4 litres"); the
    evidence check used to ask for the word "water" beside the number and refused."""
    a = rag.ask("How much water does the Quillby orchard get per tree in July?")
    assert not a.fallback, a.confidence.reason
    assert "4 litres" in a.text.split("[")[0]


def test_an_exact_term_question_with_a_low_cosine_is_answered(rag: Ragline) -> None:
    a = rag.ask("What is the Tollmann criterion?")
    assert not a.fallback, a.confidence.reason
    assert "40 particles" in a.text


@pytest.mark.parametrize("judge", ["both", "reader"])
def test_a_question_the_documents_do_not_answer_falls_back(
    judge: str, rag: Ragline, reader_rag: Ragline
) -> None:
    r = rag if judge == "both" else reader_rag
    a = r.ask("How many litres of fuel does the gearbox test rig burn per hour?")
    assert a.fallback
    assert a.confidence.level == "low"
    assert a.citations == []


def test_the_reader_alone_says_why_it_does_not_answer(reader_rag: Ragline) -> None:
    a = reader_rag.ask("How often is the gearbox test rig repainted?")
    assert a.fallback
    assert "none of them answers" in a.confidence.reason and "reader" in a.confidence.reason


def test_with_both_judges_the_evidence_check_still_refuses_on_its_rules(rag: Ragline) -> None:
    """judge=both: the evidence check's word rules still refuse (they add abstention on
    the distractor sets, benchmarks/results/reader.md); the reader alone answers this."""
    a = rag.ask("How do I enable CORS so my frontend on another origin can call my API?")
    assert a.fallback and "reader" not in a.confidence.reason


def test_the_evidence_judge_stays_selectable(
    make_rag: Callable[..., Ragline], rag: Ragline
) -> None:
    other = make_rag(index=rag.settings.index_dir, judge="evidence")
    a = other.ask("How much water does the Quillby orchard get per tree in July?")
    assert "reader" not in a.confidence.reason


def test_sentence_ranges_run_to_the_next_sentence_of_the_block() -> None:
    class Ctx:
        def block(self, n: int) -> object:
            class B:
                text = "One sentence here. Two sentences here."

            return B()

    found = [Candidate(1, 0, "One sentence here."), Candidate(1, 19, "Two sentences here.")]
    assert sentence_ranges(found, Ctx()) == [(0, 19), (19, 38)]  # type: ignore[arg-type]


def test_platt_probability_and_bars() -> None:
    bars = ReaderBars(answer=0.3, claim=0.6, scale=2.0, shift=-1.0)
    assert bars.probability(0.5) == pytest.approx(0.5)
    assert bars.probability(-1000) == 0.0


def test_why_not_names_what_the_passages_cover() -> None:
    text = why_not_read([BlockVerdict(1, "Middleware > CORS", 0.12)], 0.4, True)
    assert "'Middleware > CORS'" in text and "0.12" in text and "0.40" in text
