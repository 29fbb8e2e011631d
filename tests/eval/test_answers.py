"""Answer-level evaluation: citation scoring by hand, sentence location, and
`ragline eval --answers` end to end on a tiny claims fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.cli import app
from ragline.eval.answers import (
    AnsweredClaim,
    CitedSource,
    Claim,
    covered,
    load_claims,
    load_questions,
    score_citations,
    sentence_spans,
)
from ragline.eval.beir import DatasetError

runner = CliRunner()


def test_scores_by_hand() -> None:
    c1 = Claim("1", "x", {"A": frozenset({1}), "B": frozenset({0, 2})})
    c2 = Claim("2", "y", {"C": frozenset({3})})
    nei = Claim("3", "z", {})
    answers = [
        AnsweredClaim(
            c1,
            False,
            (
                CitedSource("A", frozenset({1})),  # right doc, right sentence
                CitedSource("B", frozenset({1})),  # right doc, wrong sentence
                CitedSource("D", frozenset({0})),  # wrong doc
            ),
        ),
        AnsweredClaim(c2, True, ()),  # fallback: nothing cited
        AnsweredClaim(nei, False, (CitedSource("A", frozenset({0})),)),  # not scored
    ]
    s = score_citations(answers)
    assert (s.claims, s.claims_without_evidence, s.answered, s.citations) == (2, 1, 1, 3)
    assert s.doc_precision == pytest.approx(2 / 3)
    assert s.doc_recall == pytest.approx(2 / 3)  # A and B of {A, B, C}
    assert s.sentence_precision == pytest.approx(1 / 3)
    assert s.sentence_recall == pytest.approx(1 / 4)  # A1 of {A1, B0, B2, C3}
    assert (s.citations_without_evidence, s.flagged_without_evidence) == (1, 0.0)


def test_citations_of_documents_without_evidence_count_how_many_were_flagged() -> None:
    c = Claim("1", "x", {"A": frozenset({0})})
    cites = (
        CitedSource("A", frozenset({0}), True),
        CitedSource("D", frozenset({0}), False),  # wrong document, flagged
        CitedSource("E", frozenset({0}), False),  # wrong document, flagged
        CitedSource("F", frozenset({1}), True),  # wrong document, passed as supported
    )
    s = score_citations([AnsweredClaim(c, False, cites)])
    assert s.citations_without_evidence == 3
    assert s.flagged_without_evidence == pytest.approx(2 / 3)
    assert s.to_dict()["flagged_without_evidence"] == pytest.approx(0.6667)


def test_sentence_spans_tolerate_whitespace() -> None:
    body = "First one.   Second\n one. Third."
    spans = sentence_spans(body, ["First one.", "Second one.", "Missing.", "Third."])
    assert [body[s:e] for s, e in spans] == ["First one.", "Second\n one.", "", "Third."]
    assert covered(spans, 14, 18) == {1}
    assert covered(spans, 0, len(body)) == {0, 1, 3}


def test_claims_loader_errors(claims_dir: Path) -> None:
    data = load_claims(claims_dir)
    assert [c.id for c in data.claims] == ["1", "2", "3"]
    assert data.claims[1].evidence == {"12": frozenset({0, 2})}
    path = claims_dir / "claims_train.jsonl"
    path.write_text('{"id": 1, "claim": "c", "evidence": {"99": []}}\n')
    with pytest.raises(DatasetError, match=r"claims_train.jsonl:1: evidence document '99'"):
        load_claims(claims_dir)
    path.write_text('{"id": 1, "claim": "c", "evidence": {"11": [{"sentences": [7]}]}}\n')
    with pytest.raises(DatasetError, match="index out of range"):
        load_claims(claims_dir)
    with pytest.raises(DatasetError, match=r"claims_dev.jsonl: file not found"):
        load_claims(claims_dir, "dev")


def test_shipped_out_of_scope_questions() -> None:
    questions = load_questions()
    assert len(questions) == 40 and len(set(questions)) == 40
    assert all(q.endswith("?") for q in questions)


def test_cli_answers_by_hand(
    claims_dir: Path, out_of_scope_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One sentence per answer: each claim repeats one abstract sentence word for word,
    # so the extractive answer is that sentence, cited to its abstract.
    monkeypatch.setenv("RAGLINE_EXTRACTIVE_MAX_SENTENCES", "1")
    report = tmp_path / "answers.md"
    result = runner.invoke(
        app,
        [
            "eval",
            "--answers",
            str(claims_dir),
            "--out-of-scope",
            str(out_of_scope_file),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--json",
            "--report",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["claims"] == 3
    ex = data["generators"]["extractive"]
    # claim 1: evidence {11: [1]} → 1 citation of sentence 11/1;
    # claim 2: evidence {12: [0, 2]} → 1 citation of sentence 12/0; claim 3 has none.
    assert (ex["claims"], ex["claims_without_evidence"], ex["citations"]) == (2, 1, 2)
    assert ex["doc_precision"] == 1.0 and ex["doc_recall"] == 1.0
    assert ex["sentence_precision"] == 1.0
    assert ex["sentence_recall"] == pytest.approx(2 / 3, abs=1e-4)
    assert ex["fallback_rate_out_of_scope"] == 1.0 and ex["out_of_scope_questions"] == 2
    assert ex["fallback_rate_in_scope"] == 0.0
    # the two claims again with their evidence abstracts removed: nothing left answers them
    assert ex["distractor_claims"] == 2 and ex["abstention_rate_distractor"] == 1.0
    assert ex["citations_without_evidence"] == 0
    assert "| extractive | 2 | 2 | 1.000 | 1.000 | 1.000 | 0.667 |" in report.read_text()


def test_answerability_auc_and_abstention_at_the_fallback_bound() -> None:
    from ragline.eval.answers import answerability

    auc, abstain = answerability([0.9, 0.8, 0.7, 0.6], [0.1, 0.65, 0.95])
    assert auc == pytest.approx(7 / 12)  # 0.1 loses 4, 0.65 loses 3 and wins 1, 0.95 wins 4
    assert abstain == pytest.approx(1 / 3)  # bar 0.6 (no answerable falls back): 0.1 only
    assert answerability([], [0.1]) != answerability([], [0.1])  # nan: nothing to compare
