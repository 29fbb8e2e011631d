"""The prompt an LLM generator answers from (the rules of DESIGN.md, in words).

The rules are what make the answer checkable: only the numbered context may be
used, every claim cites its block as ``[n]``, and a missing answer is said
plainly with the same sentence the answerer's fallback uses, so it can be
recognised.
"""

from __future__ import annotations

from ragline.answer.generators.base import GenerationRequest

FALLBACK_ANSWER = "I don't have enough information in the provided documents to answer that."
#: Confidence reason when an LLM itself says the context does not answer.
GENERATOR_DECLINED = "the generator found no answer in the passages"

SYSTEM_PROMPT = (
    "You answer questions about a collection of documents, using only the numbered "
    "context passages given with each question.\n"
    "Rules:\n"
    "1. Use only facts stated in the context. Do not use outside knowledge.\n"
    "2. After every sentence that uses a passage, cite it by its number in square "
    "brackets, e.g. [1] or [2][3]. Cite only numbers that appear in the context.\n"
    f'3. If the context does not contain the answer, reply exactly: "{FALLBACK_ANSWER}"\n'
    "4. Be concise: a few sentences, no preamble."
)


def user_message(request: GenerationRequest) -> str:
    """Context blocks, the user's selected text (if any), then the question."""
    parts = ["Context:", request.context.render()]
    if request.selected_text:
        parts += ["The user selected this text in the document:", request.selected_text]
    parts.append(f"Question: {request.question}")
    return "\n\n".join(parts)


def build_messages(request: GenerationRequest) -> list[dict[str, str]]:
    """Chat messages: the rules, the earlier turns, then this question with its context.

    History carries only the conversation's words; the context is attached to the
    current question alone, so earlier turns cannot smuggle in stale sources.
    """
    messages = [{"role": "system", "content": SYSTEM_PROMPT}]
    messages += [{"role": m.role, "content": m.content} for m in request.history]
    messages.append({"role": "user", "content": user_message(request)})
    return messages
