"""Answers in the question's language: fallback, small talk, confidence reasons."""

from __future__ import annotations

import re

import pytest

from ragline.answer import i18n
from ragline.answer.candidates import is_answer_sentence
from ragline.answer.generators.extractive import cite
from ragline.answer.sentences import prose_sentences, word_count
from ragline.types import Confidence


@pytest.mark.parametrize(
    ("question", "lang"),
    [
        ("How do I add state?", "en"),
        ("¿Cómo agrego estado a un componente?", "es"),
        ("Comment ajouter un état à un composant ?", "fr"),
        ("コンポーネントに state を追加するには？", "ja"),
        ("如何向组件添加状态？", "zh"),
        ("Wie füge ich einer Komponente einen Zustand hinzu?", "en"),  # German: English text
    ],
)
def test_answer_language(question: str, lang: str) -> None:
    assert i18n.answer_language(question) == lang


def test_fallback_in_each_language_and_recognised() -> None:
    for lang in i18n.ANSWER_LANGUAGES:
        text = i18n.fallback_text(["Hooks", "State"], lang)
        assert text.startswith(i18n.fallback_answer(lang))
        assert "Hooks" in text and "State" in text
        assert i18n.is_fallback(text)
    assert "ドキュメント" in i18n.fallback_text([], "ja")
    assert i18n.fallback_text([], "de") == i18n.fallback_answer("en")
    assert not i18n.is_fallback("状態は useState で追加します[1]。")


@pytest.mark.parametrize(
    ("message", "start"),
    [
        ("Hola", "¡Hola!"),
        ("bonjour !", "Bonjour"),
        ("こんにちは", "こんにちは"),
        ("谢谢！", "不客气"),
        ("hi", "Hello"),
    ],
)
def test_smalltalk_in_its_language(message: str, start: str) -> None:
    reply = i18n.smalltalk_reply(message)
    assert reply is not None and reply.startswith(start)
    assert i18n.smalltalk_reply("¿Cómo funciona useState?") is None


def test_confidence_reason_translated_or_kept() -> None:
    c = Confidence(0.61, "medium", "3 sources, top relevance 0.61")
    assert i18n.translate_reason(c, "ja").reason == "情報源 3 件、最大関連度 0.61"
    low = Confidence(0.1, "low", "no source is relevant enough (top relevance 0.10 < 0.30)")
    assert "0.10 < 0.30" in i18n.translate_reason(low, "fr").reason
    odd = Confidence(0.5, "medium", "some future wording")
    assert i18n.translate_reason(odd, "zh") == odd


def test_cjk_sentences_are_answer_sentences_and_cited_before_the_stop() -> None:
    text = "useState は、コンポーネントに state 変数を追加するための React フックです。"
    text += "使い方は簡単です！"
    sentences = [text[s.start : s.end] for s in prose_sentences(text)]
    assert sentences == [
        "useState は、コンポーネントに state 変数を追加するための React フックです。",
        "使い方は簡単です！",
    ]
    assert word_count(sentences[0]) >= 5
    assert is_answer_sentence(sentences[0])
    assert cite(sentences[0], 2).endswith("フックです[2]。")
    assert is_answer_sentence("¿Qué hace el Hook useState en un componente de React?") is False
    assert is_answer_sentence("El Hook useState agrega una variable de estado al componente.")


def test_english_fallback_is_the_prompts() -> None:
    from ragline.answer.generators.prompt import FALLBACK_ANSWER

    assert i18n.fallback_answer("en") == FALLBACK_ANSWER


def _english_reasons() -> list[str]:
    """Every reason template, produced by the functions that write them."""
    from ragline.answer.confidence import assess, smalltalk_confidence, with_evidence
    from ragline.answer.evidence import (
        DATE,
        EXPANSION,
        NUMBER,
        PERSON,
        PLACE,
        Constraints,
        Evidence,
        why_not,
    )
    from ragline.answer.generators.prompt import GENERATOR_DECLINED
    from ragline.types import Hit

    from .conftest import chunk

    def hit(score: float) -> Hit:
        return Hit(chunk=chunk("c", "潮", title="潮"), score=score, rank=1, vector_score=score)

    medium = assess([hit(0.5), hit(0.45)], 0.4, 0.65)
    ev = Evidence(0, 0.7, True, 1.0, 1.0, 0.6)
    c = Constraints(years=frozenset({"2018"}), terms=("潮",))
    reasons = [
        assess([], 0.4, 0.65).reason,
        assess([hit(0.2)], 0.4, 0.65).reason,
        medium.reason,
        assess([hit(0.5)], 0.4, 0.65).reason,
        smalltalk_confidence().reason,
        GENERATOR_DECLINED,
        with_evidence(medium, ev, True, "", "[1] 潮 > 大潮").reason,
        with_evidence(medium, ev, True, "").reason,
        why_not(c, None, ""),
        why_not(c, Evidence(0, 0.2, False, 0.5, 0.5, 0.3, ("2018",)), "二〇二二年 2022"),
        why_not(Constraints(terms=("潮",)), Evidence(0, 0.2, False, 0.5, 0.5, 0.3, ("月",)), ""),
        why_not(Constraints(), Evidence(0, 0.2, False, 0.5, 0.5, 0.3), ""),
    ]
    for kind in (PERSON, DATE, NUMBER, PLACE, EXPANSION, None):
        typed = Constraints(answer_type=kind)
        reasons.append(why_not(typed, Evidence(0, 0.6, False, 1.0, 1.0, 0.5, type_ok=False), ""))
    return reasons


@pytest.mark.parametrize("reason", _english_reasons())
def test_every_reason_template_is_translated(reason: str) -> None:
    latin = re.compile(r"[A-Za-z]{3,}")
    assert latin.search(reason)  # the English original (inserted values hold no Latin words)
    for lang in ("ja", "zh"):
        translated = i18n.reason_text(reason, lang)
        assert latin.search(translated) is None, (lang, translated)
    for lang in ("es", "fr"):
        assert i18n.reason_text(reason, lang) != reason, lang
    assert i18n.reason_text(reason, "de") == reason  # others: English


def test_related_passages_and_busy_notice_in_each_language() -> None:
    from ragline.answer.generators.prompt import GENERATOR_DECLINED

    for lang in i18n.ANSWER_LANGUAGES:
        text = i18n.related_text("why", ["潮 > 大潮", "潮 > 小潮"], lang)
        assert text.startswith(i18n.fallback_answer(lang)) and "潮 > 小潮" in text
        assert i18n.related_text("why", [], lang) == i18n.fallback_answer(lang)
        notices = {i18n.llm_busy_notice(e, lang) for e in ("high traffic", "429", "timed out", "?")}
        assert len(notices) == 4  # each kind of failure said differently
    assert "Related passages, which do not answer it: a; b." in i18n.related_text(
        "why", ["a", "b"], "en"
    )
    assert "関連する箇所" in i18n.related_text(GENERATOR_DECLINED, ["潮"], "ja")
    assert i18n.llm_busy_notice("429", "de") == i18n.llm_busy_notice("429", "en")
    assert i18n.llm_busy_notice("429", "en").startswith("The language model is busy (it is rate")


def test_an_unreachable_or_refusing_llm_is_not_called_busy() -> None:
    """Connection refused, or a 4xx other than 429, is a setting to fix (named);
    429 and 5xx are a busy model to wait for."""
    refused = (
        "request to the LLM endpoint failed: ConnectError: [Errno 111] Connection refused "
        "(after 1 attempts)"
    )
    assert i18n.llm_failure(refused) == "unreachable"
    assert i18n.llm_failure("LLM endpoint returned HTTP 404: Not Found") == "refused"
    assert i18n.llm_failure("LLM endpoint returned HTTP 503: down (after 5 attempts)") == "server"
    assert i18n.llm_failure("LLM endpoint returned HTTP 429: slow down") == "rate"
    for lang in i18n.ANSWER_LANGUAGES:
        for error in (refused, "LLM endpoint returned HTTP 404: Not Found"):
            notice = i18n.llm_busy_notice(error, lang)
            assert "LLM_BASE_URL" in notice and notice != i18n.llm_busy_notice("429", lang)
    assert i18n.llm_busy_notice(refused, "en").startswith(
        "The language model at LLM_BASE_URL could not be reached (check LLM_BASE_URL)"
    )
    assert i18n.llm_busy_notice("HTTP 503", "en").startswith("The language model is busy")
