"""No English in a Japanese or Chinese answer, whichever way it is written: the
confidence-gate fallback, the evidence check's related passages, a language model
that declines, one that is busy. A real index (LanceDB in a tmp dir, the real
model), a real scripted OpenAI-compatible endpoint on 127.0.0.1.

The documents hold no Latin letters, so any run of them in an answer or its
confidence reason is ragline's own English text leaking through."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragline.answer import i18n
from ragline.engine import Ragline
from ragline.types import Answer

DOCS = {
    "ja": (
        "# 潮の満ち引き\n\n"
        "潮の満ち引きは、主に月の引力によって海面が周期的に上下する現象です。"
        "満潮と干潮は、およそ一日に二回ずつ起こります。\n\n"
        "## 大潮\n\n"
        "大潮は、新月と満月のころに太陽と月の引力が重なって起こる、干満の差が大きい潮です。"
        "二〇二二年の観測では、大潮の日に干満の差が最も大きくなりました。\n\n"
        "## 小潮\n\n"
        "小潮は、上弦と下弦の月のころに起こる、干満の差が小さい潮です。"
        "小潮の日は、漁港の作業がしやすくなります。\n"
    ),
    "zh": (
        "# 潮汐\n\n"
        "潮汐是海面在月球引力作用下周期性升降的现象。高潮和低潮大约每天各出现两次。\n\n"
        "## 大潮\n\n"
        "大潮出现在新月和满月前后，这时太阳和月球的引力叠加，潮差最大。\n\n"
        "## 小潮\n\n"
        "小潮出现在上弦月和下弦月前后，这时潮差最小，渔港作业比较方便。\n"
    ),
}
#: A question the documents do not answer (volcanoes, over a page on tides).
OFF_TOPIC = {"ja": "火山の噴火はなぜ起こるのですか？", "zh": "火山为什么会喷发？"}
#: A question they answer.
ON_TOPIC = {"ja": "大潮とは何ですか？", "zh": "什么是大潮？"}
#: What "related passages" reads as in each language.
RELATED = {"ja": "関連する箇所", "zh": "相关段落"}
LATIN = re.compile(r"[A-Za-z]{3,}")


def no_english(answer: Answer) -> None:
    assert LATIN.search(answer.text) is None, answer.text
    assert LATIN.search(answer.confidence.reason) is None, answer.confidence.reason


@pytest.fixture
def index(tmp_path: Path) -> Callable[[str], Path]:
    def write(lang: str) -> Path:
        docs = tmp_path / f"docs-{lang}"
        docs.mkdir(exist_ok=True)
        (docs / "tides.md").write_text(DOCS[lang], encoding="utf-8")
        return docs

    return write


@pytest.mark.parametrize("lang", ["ja", "zh"])
def test_the_fallback_below_the_confidence_gate_is_in_the_questions_language(
    lang: str, index: Callable[[str], Path], make_rag: Callable[..., Ragline]
) -> None:
    rag = make_rag(confidence_min=0.99, confidence_high=0.995)  # nothing is relevant enough
    rag.ingest(index(lang))
    answer = rag.ask(ON_TOPIC[lang])
    assert answer.fallback and answer.confidence.level == "low"
    assert answer.text.startswith(i18n.fallback_answer(lang))
    assert answer.suggestions and answer.suggestions[0] in answer.text
    assert "0.99" in answer.confidence.reason  # the translated template, figures kept
    no_english(answer)


@pytest.mark.parametrize("lang", ["ja", "zh"])
def test_passages_that_do_not_answer_are_listed_in_the_questions_language(
    lang: str, index: Callable[[str], Path], make_rag: Callable[..., Ragline]
) -> None:
    rag = make_rag(confidence_min=0.0)  # past the gate: the evidence check decides
    rag.ingest(index(lang))
    answer = rag.ask(OFF_TOPIC[lang])
    assert answer.fallback and answer.confidence.level == "low"
    assert answer.text.startswith(i18n.fallback_answer(lang))
    assert RELATED[lang] in answer.text and answer.sources and not answer.citations
    no_english(answer)


def test_an_answer_in_japanese_has_a_japanese_reason(
    index: Callable[[str], Path], make_rag: Callable[..., Ragline]
) -> None:
    rag = make_rag(confidence_min=0.0)
    rag.ingest(index("ja"))
    answer = rag.ask(ON_TOPIC["ja"])
    assert not answer.fallback and answer.citations
    assert "文が答えています" in answer.confidence.reason  # with_evidence's reason
    no_english(answer)


def _llm_rag(
    make_rag: Callable[..., Ragline], index: Callable[[str], Path], url: str, lang: str
) -> Ragline:
    rag = make_rag(
        generator="openai",
        llm_base_url=url,
        llm_model="scripted",
        llm_max_retries=0,
        confidence_min=0.0,
        evidence_check=False,  # the generator decides, as with an LLM
    )
    rag.ingest(index(lang))
    return rag


@pytest.mark.parametrize("lang", ["ja", "zh"])
def test_a_busy_language_model_is_said_in_the_questions_language(
    lang: str,
    index: Callable[[str], Path],
    make_rag: Callable[..., Ragline],
    llm_server: tuple[str, Any],
) -> None:
    url, llm = llm_server
    llm.script = [("status", 429, {"retry-after": "0"}, "rate limited")]
    answer = _llm_rag(make_rag, index, url, lang).ask(ON_TOPIC[lang])
    notice = i18n.llm_busy_notice("429 rate limited", lang)
    assert answer.text.startswith(notice) and answer.citations
    assert answer.generator == "extractive" and answer.error
    no_english(answer)


@pytest.mark.parametrize("lang", ["ja", "zh"])
def test_a_model_that_declines_gives_the_related_fallback_in_the_questions_language(
    lang: str,
    index: Callable[[str], Path],
    make_rag: Callable[..., Ragline],
    llm_server: tuple[str, Any],
) -> None:
    url, llm = llm_server
    llm.script = [("stream", [i18n.fallback_answer("en")], "done")]  # declines in English
    answer = _llm_rag(make_rag, index, url, lang).ask(ON_TOPIC[lang])
    assert len(llm.requests) == 1
    assert answer.fallback and answer.confidence.level == "low" and not answer.citations
    assert answer.text.startswith(i18n.fallback_answer(lang)) and RELATED[lang] in answer.text
    no_english(answer)
