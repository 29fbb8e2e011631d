"""What ragline itself says in an answer, in the question's language.

The fallback, the related-passages note, the small-talk replies, the confidence
reasons, the LLM-busy (or unreachable) notice and the lead-in of the suggestions exist in English,
Spanish, French, Japanese and Chinese; any other language gets English. Pure: the
question's language comes from :func:`ragline.text.language.query_language`.

Confidence reasons are written in English by :mod:`ragline.answer.confidence`
and :mod:`ragline.answer.evidence`; :func:`translate_reason` recognises those
templates and rewrites them, leaving any other reason as it is, so the modules
can change independently (tests/answer/test_i18n.py produces every template
with the real functions and fails on one left in English).
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


_REASONS += [
    (
        re.compile(r"^small talk: nothing was retrieved$"),
        {
            "es": "conversación: no se buscó nada",
            "fr": "conversation : rien n'a été recherché",
            "ja": "雑談のため、検索は行っていません",
            "zh": "闲聊：未进行检索",
        },
    ),
    (
        re.compile(r"^the generator found no answer in the passages$"),
        {
            "es": "el generador no encontró la respuesta en los pasajes",
            "fr": "le générateur n'a pas trouvé la réponse dans les passages",
            "ja": "生成モデルは各箇所に答えを見つけられませんでした",
            "zh": "生成器未在段落中找到答案",
        },
    ),
    (
        re.compile(r"^no retrieved passage has a sentence to check$"),
        {
            "es": "ningún pasaje recuperado tiene una frase que comprobar",
            "fr": "aucun passage trouvé n'a de phrase à vérifier",
            "ja": "検索された箇所に確認できる文がありません",
            "zh": "检索到的段落中没有可供核对的句子",
        },
    ),
    (
        re.compile(r"^the passages cover (?P<found>.+), not (?P<asked>.+)$"),
        {
            "es": "los pasajes tratan {found}, no {asked}",
            "fr": "les passages portent sur {found}, pas sur {asked}",
            "ja": "各箇所が扱うのは {found} で、{asked} ではありません",
            "zh": "段落涉及的是 {found}，而不是 {asked}",
        },
    ),
    (
        re.compile(r"^the passages do not mention (?P<terms>.+)$"),
        {
            "es": "los pasajes no mencionan {terms}",
            "fr": "les passages ne mentionnent pas {terms}",
            "ja": "各箇所に {terms} への言及がありません",
            "zh": "段落中没有提到 {terms}",
        },
    ),
    (
        re.compile(r"^no passage sentence gives (?P<kind>.+)$"),
        {
            "es": "ninguna frase de los pasajes da {kind}",
            "fr": "aucune phrase des passages ne donne {kind}",
            "ja": "{kind}を示す文がありません",
            "zh": "没有句子给出{kind}",
        },
    ),
    (
        re.compile(
            r"^no passage sentence answers the question \(best evidence (?P<ev>[\d.]+); "
            r"key terms covered (?P<pct>\d+%)\)$"
        ),
        {
            "es": "ninguna frase de los pasajes responde a la pregunta (mejor evidencia {ev}; "
            "términos clave cubiertos {pct})",
            "fr": "aucune phrase des passages ne répond à la question (meilleure preuve {ev} ; "
            "termes clés couverts {pct})",
            "ja": "質問に答える文がありません（最良の根拠 {ev}、キーワードの網羅率 {pct}）",
            "zh": "没有句子回答该问题（最佳证据 {ev}；关键词覆盖 {pct}）",
        },
    ),
    (  # ragline.answer.confidence.with_evidence: "<retrieval reason>; a sentence … answers it"
        re.compile(
            r"^(?P<head>.+); a sentence(?: in (?P<label>.+))? answers it "
            r"\(evidence (?P<ev>[\d.]+), (?P<pct>\d+%) of the key terms\)$",
            re.S,
        ),
        {
            "es": "{head}; una frase{label} responde (evidencia {ev}, {pct} de los términos clave)",
            "fr": "{head} ; une phrase{label} y répond (preuve {ev}, {pct} des termes clés)",
            "ja": "{head}。{label}の文が答えています（根拠 {ev}、キーワードの {pct}）",
            "zh": "{head}；{label}的一个句子回答了该问题（证据 {ev}，关键词的 {pct}）",
        },
    ),
]

#: What the ``kind`` of "no passage sentence gives …" reads as.
_KINDS: dict[str, dict[str, str]] = {
    "a name": {"es": "un nombre", "fr": "un nom", "ja": "名前", "zh": "名字"},
    "a date": {"es": "una fecha", "fr": "une date", "ja": "日付", "zh": "日期"},
    "a number": {"es": "un número", "fr": "un nombre", "ja": "数値", "zh": "数字"},
    "a place": {"es": "un lugar", "fr": "un lieu", "ja": "場所", "zh": "地点"},
    "what it stands for": {
        "es": "lo que significa",
        "fr": "ce qu'il signifie",
        "ja": "略語の意味",
        "zh": "缩写的含义",
    },
    "the answer": {"es": "la respuesta", "fr": "la réponse", "ja": "答え", "zh": "答案"},
}
#: How the answering block is named inside a reason ("in [1] Title").
_IN_LABEL = {"es": " en {label}", "fr": " dans {label}", "ja": "{label}", "zh": "{label}"}

#: After the fallback, when passages were found that do not answer (the English one
#: is prompt.RELATED_NOT_ANSWER; the test checks).
RELATED: dict[str, str] = {
    "en": "({reason}.) Related passages, which do not answer it: {passages}.",
    "es": "({reason}.) Pasajes relacionados, que no responden a la pregunta: {passages}.",
    "fr": "({reason}.) Passages liés, qui n'y répondent pas : {passages}.",
    "ja": "（{reason}。）関連する箇所（質問の答えではありません）：{passages}。",
    "zh": "（{reason}。）相关段落（并未回答该问题）：{passages}。",
}

#: The first words of an answer quoted by the extractive generator because the
#: language model failed; ``{why}`` is one of :data:`BUSY_WHY`.
BUSY: dict[str, str] = {
    "en": "The language model is busy ({why}), so this answer quotes the most relevant "
    "passages instead. ",
    "es": "El modelo de lenguaje está ocupado ({why}), así que esta respuesta cita en su "
    "lugar los pasajes más relevantes. ",
    "fr": "Le modèle de langage est occupé ({why}) : cette réponse cite donc plutôt les "
    "passages les plus pertinents. ",
    "ja": "言語モデルが混み合っているため（{why}）、代わりに最も関連する箇所を引用して回答します。",
    "zh": "语言模型繁忙（{why}），因此本回答改为引用最相关的段落。",
}
BUSY_WHY: dict[str, dict[str, str]] = {
    "traffic": {
        "en": "high traffic, please try again in a few seconds",
        "es": "mucho tráfico, inténtalo de nuevo en unos segundos",
        "fr": "trafic élevé, réessayez dans quelques secondes",
        "ja": "アクセスが集中しています。数秒後にもう一度お試しください",
        "zh": "访问量过大，请几秒后重试",
    },
    "rate": {
        "en": "it is rate limited",
        "es": "ha alcanzado su límite de peticiones",
        "fr": "sa limite de requêtes est atteinte",
        "ja": "リクエスト数の上限に達しました",
        "zh": "已达到请求频率上限",
    },
    "timeout": {
        "en": "it did not answer in time",
        "es": "no respondió a tiempo",
        "fr": "il n'a pas répondu à temps",
        "ja": "時間内に応答がありませんでした",
        "zh": "未能及时响应",
    },
    "malformed": {
        "en": "its reply could not be read",
        "es": "su respuesta no se pudo leer",
        "fr": "sa réponse est illisible",
        "ja": "応答を読み取れませんでした",
        "zh": "无法读取其响应",
    },
    "server": {
        "en": "it answered with a server error",
        "es": "respondió con un error del servidor",
        "fr": "il a répondu par une erreur serveur",
        "ja": "サーバーエラーが返されました",
        "zh": "服务器返回错误",
    },
}

#: The first words of an answer quoted because the language model could not be
#: used at all: a setting to fix, not a wait; ``{why}`` is one of :data:`UNUSABLE_WHY`.
UNUSABLE: dict[str, str] = {
    "en": "The language model at LLM_BASE_URL {why}, so this answer quotes the most "
    "relevant passages instead. ",
    "es": "El modelo de lenguaje de LLM_BASE_URL {why}, así que esta respuesta cita en su "
    "lugar los pasajes más relevantes. ",
    "fr": "Le modèle de langage de LLM_BASE_URL {why} : cette réponse cite donc plutôt les "
    "passages les plus pertinents. ",
    "ja": "LLM_BASE_URL の言語モデルは{why}。代わりに最も関連する箇所を引用して回答します。",
    "zh": "LLM_BASE_URL 的语言模型{why}，因此本回答改为引用最相关的段落。",
}
UNUSABLE_WHY: dict[str, dict[str, str]] = {
    "unreachable": {
        "en": "could not be reached (check LLM_BASE_URL)",
        "es": "no se pudo contactar (revisa LLM_BASE_URL)",
        "fr": "est injoignable (vérifiez LLM_BASE_URL)",
        "ja": "接続できませんでした（LLM_BASE_URL を確認してください）",
        "zh": "无法连接（请检查 LLM_BASE_URL）",
    },
    "refused": {
        "en": "refused the request (check LLM_BASE_URL, LLM_MODEL and LLM_API_KEY)",
        "es": "rechazó la petición (revisa LLM_BASE_URL, LLM_MODEL y LLM_API_KEY)",
        "fr": "a refusé la requête (vérifiez LLM_BASE_URL, LLM_MODEL et LLM_API_KEY)",
        "ja": "リクエストを拒否しました（LLM_BASE_URL、LLM_MODEL、LLM_API_KEY を確認してください）",
        "zh": "拒绝了请求（请检查 LLM_BASE_URL、LLM_MODEL 和 LLM_API_KEY）",
    },
}

_HTTP_STATUS = re.compile(r"\bhttp (\d{3})\b")


def llm_failure(error: str) -> str:
    """The kind of a generation error: a key of :data:`BUSY_WHY` (the model is there
    but busy: try again) or of :data:`UNUSABLE_WHY` (a setting is wrong: fix it)."""
    low = error.lower()
    status = _HTTP_STATUS.search(low)
    code = int(status.group(1)) if status else None
    if "high traffic" in low:
        return "traffic"
    if code == 429 or (code is None and ("429" in low or "rate limit" in low)):
        return "rate"
    if "timed out" in low:
        return "timeout"
    if "malformed" in low:
        return "malformed"
    if code is not None and code >= 500:
        return "server"
    if code is not None:
        return "refused"
    return "unreachable"  # a transport failure: connection refused, no such host


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


def reason_text(reason: str, language: str) -> str:
    """``reason`` in ``language`` when its template is known, else as it is."""
    if language == "en":
        return reason
    for pattern, texts in _REASONS:
        m = pattern.match(reason)
        if m is None or language not in texts:
            continue
        parts = {k: v or "" for k, v in m.groupdict().items()}
        if "head" in parts:  # a reason inside the reason
            parts["head"] = reason_text(parts["head"], language)
        if parts.get("label"):
            parts["label"] = _IN_LABEL[language].format(label=parts["label"])
        if "kind" in parts:
            parts["kind"] = _KINDS.get(parts["kind"], {}).get(language, parts["kind"])
        return texts[language].format(**parts)
    return reason


def translate_reason(confidence: Confidence, language: str) -> Confidence:
    """``confidence`` with its reason in ``language`` when the template is known."""
    text = reason_text(confidence.reason, language)
    return confidence if text == confidence.reason else replace(confidence, reason=text)


def related_text(reason: str, labels: list[str], language: str = "en") -> str:
    """The fallback when passages were found but none answers: why (``reason``, in
    ``language`` already), and what they are, so the reader can look, knowing they
    are related, not an answer."""
    text = fallback_answer(language)
    if not labels:
        return text
    passages = _LIST_SEP.get(language, "; ").join(dict.fromkeys(labels))
    note = RELATED.get(language, RELATED["en"]).format(reason=reason, passages=passages)
    return text + ("" if language in _LIST_SEP else " ") + note


def llm_busy_notice(error: str, language: str = "en") -> str:
    """The first words of an answer the extractive generator wrote because the
    language model failed (``error`` says how; only its kind is shown)."""
    why = llm_failure(error)
    lang = language if language in BUSY else "en"
    if why in UNUSABLE_WHY:
        return UNUSABLE[lang].format(why=UNUSABLE_WHY[why][lang])
    return BUSY[lang].format(why=BUSY_WHY[why][lang])
