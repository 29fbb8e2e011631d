"""The shipped reader: its file, hash and card agree, and it reads (real model, no fakes)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from ragline.reader import Reader, ReaderError, shared_reader
from ragline.reader.model import MAX_LENGTH, MODEL_SHA256, model_path

REPO = Path(__file__).resolve().parents[2]
CARD = REPO / "src" / "ragline" / "reader" / "assets" / "READER_CARD.md"

QUESTION = "How much water does the Quillby orchard get per tree in July?"
ANSWERING = (
    "Irrigation at the Quillby orchard. In spring the rows are mulched. The drip line "
    "drips 4 litres per tree each evening in July, and twice that in a heatwave."
)
TOPICAL = "The Quillby orchard was planted with apple and pear trees on a south slope."
UNRELATED = "CORSMiddleware lets a frontend on another origin call your API."


def test_file_hash_card_and_constant_agree() -> None:
    digest = hashlib.sha256(model_path().read_bytes()).hexdigest()
    assert digest == MODEL_SHA256
    card = CARD.read_text(encoding="utf-8")
    assert f"SHA-256: `{digest}`" in card
    size = re.search(r"\(([\d,]+) bytes\)", card)
    assert size is not None and int(size.group(1).replace(",", "")) == model_path().stat().st_size
    assert model_path().stat().st_size <= 30 * 1024 * 1024  # the bound on the package


def test_card_names_scripts_that_exist() -> None:
    card = CARD.read_text(encoding="utf-8")
    for script in re.findall(r"python (\S+\.py)", card):
        assert (REPO / script).is_file(), script


def test_answering_passage_outscores_topical_and_unrelated() -> None:
    r = shared_reader()
    ans, top, unrel = r.read(QUESTION, [ANSWERING, TOPICAL, UNRELATED])
    assert ans.logit > top.logit > unrel.logit
    span = ans.best_span()
    assert span is not None and "4" in ANSWERING[span[1] : span[2]]


def test_long_passage_overflows_into_windows_and_finds_the_far_answer() -> None:
    filler = " ".join(
        f"Row {i} of the orchard holds pear trees of the old kind." for i in range(60)
    )
    reading = shared_reader().read(QUESTION, [filler + " " + ANSWERING])[0]
    assert len(reading.windows) > 1  # ~700 tokens in windows of MAX_LENGTH
    assert all(len(w.starts) < MAX_LENGTH for w in reading.windows)
    span = reading.best_span()
    assert span is not None and span[1] > len(filler) - 200


def test_span_within_a_range_stays_inside_it() -> None:
    reading = shared_reader().read(QUESTION, [ANSWERING])[0]
    lo = ANSWERING.index("In spring")
    hi = ANSWERING.index("The drip")
    span = reading.best_span(lo, hi)
    assert span is not None and lo <= span[1] and span[2] <= hi


def test_long_question_is_cut_not_failed() -> None:
    question = "why " * 400 + QUESTION
    (reading,) = shared_reader().read(question, [ANSWERING])
    assert reading.windows


def test_empty_input() -> None:
    assert shared_reader().read(QUESTION, []) == []


def test_damaged_model_file_is_refused_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "reader-int8.onnx"
    bad.write_bytes(model_path().read_bytes()[: 1 << 20])  # cut short
    with pytest.raises(ReaderError, match=re.escape(str(bad))):
        Reader(bad).read(QUESTION, [ANSWERING])
    with pytest.raises(Exception, match="not found"):
        Reader(tmp_path / "missing.onnx").read(QUESTION, [ANSWERING])


def test_packaged_hash_mismatch_names_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import ragline.reader.model as m

    monkeypatch.setattr(m, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ReaderError, match="sha256"):
        Reader().read(QUESTION, [ANSWERING])
