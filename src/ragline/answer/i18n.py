"""What ragline itself says in an answer, in the question's language.

The fallback, the small-talk replies, the confidence reason and the lead-in of
the suggestions exist in English, Spanish, French, Japanese and Chinese; any
other language gets English. Pure: the question's language comes from
:func:`ragline.text.language.query_language`.

Confidence reasons are written in English by :mod:`ragline.answer.confidence`;
:func:`translate_reason` recognises those templates and rewrites them, leaving
any other reason as it is, so the two modules can change independently.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ragline.answer.smalltalk import smalltalk_kind
from ragline.answer.smalltalk import smalltalk_reply as english_reply
from ragline.text.language import query_language
from ragline.types import Confidence

#: Languages ragline answers in; others get English.
ANSWER_LANGUAGES = ("en", "es", "fr", "ja", "zh")

FALLBACK: dict[str, str] = {
    # = prompt.FALLBACK_ANSWER (the test checks; importing it here would be circular)
    "en": "I don't have enough information in the provided documents to answer that.",
    "es": "No tengo suficiente información en los documentos proporcionados para responder a eso.",
    "fr": "Je n'ai pas assez d'informations dans les documents fournis pour répondre à cela.",
    "ja": "提供されたドキュメントには、その質問に答えるのに十分な情報がありません。",
    "zh": "所提供的文档中没有足够的信息来回答这个问题。",
}

#: Lead-in of the topics the corpus covers, appended to the fallback.
COVERS: dict[str, str] = {
    "en": " The documents cover, for example: {topics}.",
    "es": " Los documentos tratan, por ejemplo: {topics}.",
    "fr": " Les documents traitent, par exemple : {topics}.",
    "ja": "ドキュメントで扱っている内容の例：{topics}。",
    "zh": "文档涵盖的内容例如：{topics}。",
}
_LIST_SEP = {"ja": "、", "zh": "；"}

REPLIES: dict[str, dict[str, str]] = {
    "es": {
        "identity": "Respondo preguntas a partir de los documentos indexados y cito los pasajes "
        "que uso. Pregúntame sobre cualquier tema que traten.",
        "thanks": "¡De nada! Pregúntame lo que quieras sobre los documentos.",
        "bye": "¡Adiós!",
        "greeting": "¡Hola! Hazme una pregunta sobre los documentos y te responderé a partir "
        "de ellos, con citas.",
        "ack": "Hazme una pregunta sobre los documentos cuando quieras.",
    },
    "fr": {
        "identity": "Je réponds aux questions à partir des documents indexés et je cite les "
        "passages utilisés. Posez-moi une question sur leur contenu.",
        "thanks": "Avec plaisir ! Posez-moi d'autres questions sur les documents.",
        "bye": "Au revoir !",
        "greeting": "Bonjour ! Posez-moi une question sur les documents et j'y répondrai à "
        "partir d'eux, avec des citations.",
        "ack": "Posez-moi une question sur les documents quand vous voulez.",
    },
    "ja": {
        "identity": "インデックス化されたドキュメントをもとに質問に答え、使った箇所を引用します。"
        "ドキュメントの内容について何でも聞いてください。",
        "thanks": "どういたしまして！ドキュメントについて他にも何でも聞いてください。",
        "bye": "さようなら！",
        "greeting": "こんにちは！ドキュメントについて質問してください。引用付きでお答えします。",
        "ack": "準備ができたら、ドキュメントについて質問してください。",
    },
    "zh": {
        "identity": "我根据已索引的文档回答问题，并引用所用的段落。请随时询问文档涉及的任何内容。",
        "thanks": "不客气！欢迎继续询问有关文档的问题。",
        "bye": "再见！",
        "greeting": "你好！请就文档提问，我会根据文档回答并附上引用。",
        "ack": "准备好后，请就文档提出问题。",
    },
}

#: Small talk in the other answer languages (matched whole, punctuation ignored).
PHRASES: dict[str, dict[str, str]] = {
    "es": {
        "hola": "greeting",
        "buenos dias": "greeting",
        "buenas tardes": "greeting",
        "buenas noches": "greeting",
        "que tal": "greeting",
        "gracias": "thanks",
        "muchas gracias": "thanks",
        "adios": "bye",
        "hasta luego": "bye",
        "quien eres": "identity",
        "vale": "ack",
        "de acuerdo": "ack",
    },
    "fr": {
        "bonjour": "greeting",
        "salut": "greeting",
        "bonsoir": "greeting",
        "merci": "thanks",
        "merci beaucoup": "thanks",
        "au revoir": "bye",
        "a bientot": "bye",
        "qui es tu": "identity",
        "d accord": "ack",
    },
    "ja": {
        "こんにちは": "greeting",
        "こんばんは": "greeting",
        "おはよう": "greeting",
        "おはようございます": "greeting",
        "ありがとう": "thanks",
        "ありがとうございます": "thanks",
        "さようなら": "bye",
        "またね": "bye",
        "あなたは誰": "identity",
        "あなたは誰ですか": "identity",
        "了解": "ack",
    },
    "zh": {
        "你好": "greeting",
        "您好": "greeting",
        "早上好": "greeting",
        "晚上好": "greeting",
        "谢谢": "thanks",
        "谢谢你": "thanks",
        "多谢": "thanks",
        "再见": "bye",
        "你是谁": "identity",
        "好的": "ack",
    },
}

_PUNCT = re.compile(r"[\s!¡?¿.,;:'’\"。！？、，～~]+")
_FOLD = str.maketrans("áéíóúàèìòùâêîôûäëïöüçñ", "aeiouaeiouaeiouaeioucn")

#: The English confidence reasons of ragline.answer.confidence, and their translations.
_REASONS: list[tuple[re.Pattern[str], dict[str, str]]] = [
    (
        re.compile(r"^nothing relevant was retrieved$"),
        {
            "es": "no se recuperó nada relevante",
            "fr": "rien de pertinent n'a été trouvé",
            "ja": "関連する情報が見つかりませんでした",
            "zh": "没有检索到相关内容",
        },
    ),
    (
        re.compile(
            r"^no source is relevant enough \(top relevance (?P<score>[\d.]+) < (?P<min>[\d.]+)\)$"
        ),
        {
            "es": "ninguna fuente es lo bastante relevante (relevancia máxima {score} < {min})",
            "fr": "aucune source n'est assez pertinente (pertinence maximale {score} < {min})",
            "ja": "十分に関連する情報源がありません（最大関連度 {score} < {min}）",
            "zh": "没有足够相关的来源（最高相关度 {score} < {min}）",
        },
    ),
    (
        re.compile(r"^(?P<n>\d+) sources?, top relevance (?P<score>[\d.]+)$"),
        {
            "es": "{n} fuente(s), relevancia máxima {score}",
            "fr": "{n} source(s), pertinence maximale {score}",
            "ja": "情報源 {n} 件、最大関連度 {score}",
            "zh": "{n} 个来源，最高相关度 {score}",
        },
    ),
]


def answer_language(question: str) -> str:
    """The language to answer ``question`` in: its own when supported, else English."""
    lang = query_language(question)
    return lang if lang in ANSWER_LANGUAGES else "en"


def fallback_answer(language: str) -> str:
    return FALLBACK.get(language, FALLBACK["en"])


def fallback_text(suggestions: list[str], language: str = "en") -> str:
    """The safe answer, with what the corpus does cover when that is known."""
    text = fallback_answer(language)
    if not suggestions:
        return text
    sep = _LIST_SEP.get(language, "; ")
    lead = COVERS.get(language, COVERS["en"])
    return text + lead.format(topics=sep.join(suggestions))


def is_fallback(text: str) -> bool:
    """True when a generator itself said (in any answer language) that the context
    does not hold the answer."""
    flat = " ".join(text.lower().split())
    return any(f.lower().rstrip(".。") in flat for f in FALLBACK.values())


def smalltalk_reply(message: str) -> str | None:
    """A short reply to small talk in its own language, or None for a real question."""
    key = _PUNCT.sub(" ", message.lower()).translate(_FOLD).strip()
    for lang, phrases in PHRASES.items():
        kind = phrases.get(key) or phrases.get(key.replace(" ", ""))
        if kind is not None:
            return REPLIES[lang][kind]
    if smalltalk_kind(message) is None:
        return None
    return english_reply(message)


def translate_reason(confidence: Confidence, language: str) -> Confidence:
    """``confidence`` with its reason in ``language`` when the template is known."""
    if language == "en":
        return confidence
    for pattern, texts in _REASONS:
        m = pattern.match(confidence.reason)
        if m and language in texts:
            return replace(confidence, reason=texts[language].format(**m.groupdict()))
    return confidence
