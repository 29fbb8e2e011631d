"""Builders for the answering tests: hand-made chunks, hits and contexts."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragline.answer.context import Context, build_context
from ragline.answer.embedding_cache import EmbeddingCache
from ragline.embed.base import Embedder
from ragline.embed.tokenizer import TokenCounter
from ragline.types import Chunk, Hit


def chunk(
    cid: str,
    text: str,
    *,
    title: str = "Guide",
    section: str = "",
    doc_id: str = "doc",
    chunk_index: int = 0,
    start_char: int = 0,
    **extra: Any,
) -> Chunk:
    """A Chunk with every field filled; ``end_char`` follows from ``text``."""
    fields: dict[str, Any] = {
        "id": cid,
        "doc_id": doc_id,
        "tenant": "default",
        "source": f"/docs/{doc_id}.md",
        "title": title,
        "chapter": "",
        "section": section or title,
        "heading_path": (title, section) if section else (title,),
        "url": f"file:///docs/{doc_id}.md",
        "anchor": section.lower().replace(" ", "-"),
        "chunk_index": chunk_index,
        "start_char": start_char,
        "end_char": start_char + len(text),
        "token_count": len(text.split()),
        "word_count": len(text.split()),
        "has_code": False,
        "has_equations": False,
        "content_hash": f"hash-{cid}",
        "created_at": "2024-01-01T00:00:00Z",
        "text": text,
    }
    fields.update(extra)
    return Chunk(**fields)


def hit(c: Chunk, score: float = 0.5, rank: int = 1, **kw: Any) -> Hit:
    kw.setdefault("vector_score", score)
    return Hit(chunk=c, score=score, rank=rank, **kw)


#: Five blocks about different topics (for citation mapping and verification).
TOPICS = [
    (
        "Dropout",
        "Regularization",
        "Dropout zeroes a random fraction of the activations at every "
        "training step. This keeps the network from relying on any single neuron.",
    ),
    (
        "Optimizers",
        "Momentum",
        "Momentum keeps a leaky average of past gradients. The update then "
        "follows that average instead of the latest gradient alone.",
    ),
    (
        "Hardware",
        "GPUs",
        "GPUs run thousands of threads in parallel. That makes large matrix "
        "multiplications much faster than on a CPU.",
    ),
    (
        "Sequence Models",
        "LSTM",
        "An LSTM has an input gate, a forget gate and an output gate. The "
        "forget gate decides how much of the memory cell is kept.",
    ),
    (
        "Data",
        "Broadcasting",
        "Broadcasting copies the elements of a smaller tensor along an axis. "
        "Two tensors of different shapes can then be added elementwise.",
    ),
]


def topic_hits() -> list[Hit]:
    """One hit per topic, ranked in list order; all share one cosine (0.55, above the
    confidence threshold) so that only sentence similarity tells them apart."""
    return [
        hit(
            chunk(f"c{i}", text, title=title, section=section, doc_id=f"d{i}"),
            0.6 - i / 20,
            i + 1,
            vector_score=0.55,
        )
        for i, (title, section, text) in enumerate(TOPICS)
    ]


@pytest.fixture(scope="session")
def count_tokens() -> TokenCounter:
    return TokenCounter()


@pytest.fixture(scope="session")
def cache(embedder: Embedder) -> EmbeddingCache:
    return EmbeddingCache(embedder)


@pytest.fixture
def topic_context(count_tokens: TokenCounter) -> Context:
    return build_context(topic_hits(), count_tokens, 2000)


@pytest.fixture(scope="session")
def make_chunk() -> Callable[..., Chunk]:
    return chunk


@pytest.fixture(scope="session")
def make_hit() -> Callable[..., Hit]:
    return hit


@pytest.fixture
def five_hits() -> list[Hit]:
    return topic_hits()


# --- a scripted OpenAI-compatible server on 127.0.0.1 -----------------------------


class ScriptedLLM:
    """Answers each POST /v1/chat/completions with the next scripted behaviour.

    Behaviours: ``("stream", [texts], end)`` streams SSE chunks, ``end`` being
    "done" (finish_reason + usage + [DONE]), "cut" (the connection drops inside
    the chunked body) or "eof" (a clean close without [DONE]); ``("status",
    code, headers, body)``; ``("sleep", seconds)`` stalls before answering;
    ``("raw", code, content_type, body)`` sends ``body`` (bytes) as it is;
    ``("drip", [texts], seconds)`` streams one text every ``seconds``.
    Requests (path, headers, JSON body) are recorded.
    """

    def __init__(self) -> None:
        self.script: list[tuple[Any, ...]] = []
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def next(self) -> tuple[Any, ...]:
        with self.lock:
            return self.script.pop(0) if self.script else ("status", 500, {}, "script exhausted")


def _handler(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            llm.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            action = llm.next()
            if action[0] == "sleep":
                time.sleep(action[1])
                action = ("stream", ["late"], "done")
            if action[0] == "raw":
                _, code, content_type, raw = action
                self.send_response(code)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
                return
            if action[0] == "status":
                _, code, headers, text = action
                payload = json.dumps({"error": {"message": text}}).encode()
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            _, texts, end = action
            pause = 0.0
            if action[0] == "drip":
                pause, end = float(end), "done"
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            if end == "eof":
                self.send_header("connection", "close")
                self.close_connection = True
            else:
                self.send_header("transfer-encoding", "chunked")
            self.end_headers()

            def send(event: str) -> None:
                data = f"data: {event}\n\n".encode()
                if end == "eof":
                    self.wfile.write(data)
                else:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            send(json.dumps({"choices": [{"delta": {"role": "assistant"}, "index": 0}]}))
            for t in texts:
                time.sleep(pause)
                try:
                    send(json.dumps({"choices": [{"delta": {"content": t}, "index": 0}]}))
                except OSError:  # the client gave up on a slow stream
                    return
            if end == "cut":
                self.wfile.write(b'7f\r\ndata: {"cho')  # a chunk that never completes
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if end == "done":
                send(json.dumps({"choices": [{"delta": {}, "finish_reason": "stop", "index": 0}]}))
                send(
                    json.dumps(
                        {
                            "choices": [],
                            "usage": {
                                "prompt_tokens": 120,
                                "completion_tokens": len(texts),
                                "total_tokens": 120 + len(texts),
                            },
                        }
                    )
                )
                send("[DONE]")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

    return Handler


@pytest.fixture
def llm_server() -> Iterator[tuple[str, ScriptedLLM]]:
    """(base_url, script) of a real HTTP server on 127.0.0.1 (a free port)."""
    llm = ScriptedLLM()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(llm))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", llm
    finally:
        server.shutdown()
        server.server_close()
