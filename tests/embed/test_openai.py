"""The OpenAI-compatible embedder against a real HTTP server with injected faults."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ragline.embed.base import Embedder, EmbeddingError
from ragline.embed.openai import OpenAIEmbedder
from ragline.embed.tokenizer import TokenCounter

DIM = 8


def raw_vector(text: str) -> list[float]:
    """A deterministic, deliberately unnormalised vector per text."""
    digest = hashlib.sha256(text.encode()).digest()
    return [float(b) - 100.0 for b in digest[:DIM]]


def expected(texts: list[str]) -> np.ndarray:
    arr = np.asarray([raw_vector(t) for t in texts], dtype=np.float32)
    return arr / np.linalg.norm(arr, axis=1, keepdims=True)


@dataclass
class Fault:
    """One scripted reply: an error status (with headers/body) or a stall."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, object] | None = None
    stall_s: float = 0.0


@dataclass
class ServerState:
    faults: dict[str, list[Fault]] = field(default_factory=dict)  # by first input text
    requests: list[tuple[str, ...]] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, first_text: str, *faults: Fault) -> None:
        self.faults.setdefault(first_text, []).extend(faults)

    def count(self, first_text: str) -> int:
        return sum(1 for r in self.requests if r and r[0] == first_text)


class Handler(BaseHTTPRequestHandler):
    server: EmbeddingsServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)

    def do_POST(self) -> None:
        state = self.server.state
        if self.path != "/v1/embeddings":
            state.auth.append(self.headers.get("Authorization"))
            text = f"no route {self.path}".encode()
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        inputs = tuple(payload["input"])
        with state.lock:
            state.requests.append(inputs)
            state.auth.append(self.headers.get("Authorization"))
            state.models.append(payload["model"])
            queue = state.faults.get(inputs[0], [])
            fault = queue.pop(0) if queue else None
        if fault is not None:
            if fault.stall_s:
                time.sleep(fault.stall_s)
            if fault.status != 200:
                body = fault.body or {"error": {"message": f"injected {fault.status}"}}
                self._send(fault.status, body, fault.headers)
                return
        data = [
            {"object": "embedding", "index": i, "embedding": raw_vector(t)}
            for i, t in enumerate(inputs)
        ]
        data.reverse()  # clients must order by "index", not by position
        self._send(200, {"object": "list", "data": data, "model": payload["model"]})


class EmbeddingsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = ServerState()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    srv = EmbeddingsServer()
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make(server: EmbeddingsServer, sleeps: list[float], **kw: object) -> OpenAIEmbedder:
    opts: dict[str, object] = {"batch_size": 4, "timeout_s": 5.0, "rng": lambda: 0.5}
    opts.update(kw)
    return OpenAIEmbedder(
        server.base_url,
        "sk-test",
        "test-embed",
        sleep=sleeps.append,
        **opts,  # type: ignore[arg-type]
    )


TEXTS = [f"passage number {i}" for i in range(10)]


def test_batches_and_order(server: EmbeddingsServer, sleeps: list[float]) -> None:
    out = make(server, sleeps).embed_documents(TEXTS)
    assert [len(r) for r in server.state.requests] == [4, 4, 2]
    np.testing.assert_allclose(out, expected(TEXTS), atol=1e-6)
    assert out.dtype == np.float32
    assert server.state.auth == ["Bearer sk-test"] * 3
    assert server.state.models == ["test-embed"] * 3
    assert sleeps == []


def test_is_an_embedder_without_a_request(server: EmbeddingsServer, sleeps: list[float]) -> None:
    # Python 3.11's protocol isinstance() reads the properties: with a configured
    # dimension that costs no request.
    assert isinstance(make(server, sleeps, dimension=DIM), Embedder)
    assert server.state.requests == []


def test_429_on_one_batch_resends_only_that_batch(
    server: EmbeddingsServer, sleeps: list[float]
) -> None:
    server.state.fail(TEXTS[4], Fault(429, {"Retry-After": "1"}))
    out = make(server, sleeps).embed_documents(TEXTS)
    np.testing.assert_allclose(out, expected(TEXTS), atol=1e-6)
    assert server.state.count(TEXTS[0]) == 1
    assert server.state.count(TEXTS[4]) == 2
    assert server.state.count(TEXTS[8]) == 1
    assert sleeps == [1.0]  # Retry-After honoured instead of the backoff


def test_retry_after_is_capped(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", Fault(429, {"Retry-After": "3600"}))
    make(server, sleeps).embed_query("q")
    assert sleeps == [60.0]


def test_retry_after_http_date(server: EmbeddingsServer, sleeps: list[float]) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    server.state.fail("q", Fault(503, {"Retry-After": when}))
    make(server, sleeps).embed_query("q")
    assert len(sleeps) == 1
    assert 3.0 <= sleeps[0] <= 5.0


def test_500_then_success(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", Fault(500))
    vec = make(server, sleeps).embed_query("q")
    np.testing.assert_allclose(vec, expected(["q"])[0], atol=1e-6)
    assert server.state.count("q") == 2
    assert sleeps == [1.0]


def test_408_is_retried(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", Fault(408))
    make(server, sleeps).embed_query("q")
    assert server.state.count("q") == 2


def test_425_is_retried(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", Fault(425))
    make(server, sleeps).embed_query("q")
    assert server.state.count("q") == 2
    assert sleeps == [1.0]


def test_400_is_not_retried_and_surfaces_the_message(
    server: EmbeddingsServer, sleeps: list[float]
) -> None:
    msg = "This model's maximum context length is 8192 tokens"
    server.state.fail("q", Fault(400, body={"error": {"message": msg, "type": "invalid"}}))
    with pytest.raises(EmbeddingError, match=r"HTTP 400.*maximum context length") as info:
        make(server, sleeps).embed_query("q")
    assert "not retried" in str(info.value)
    assert server.state.count("q") == 1
    assert sleeps == []


def test_404_plain_text_body(server: EmbeddingsServer, sleeps: list[float]) -> None:
    emb = OpenAIEmbedder(server.base_url + "/wrong", "", "m", sleep=sleeps.append)
    with pytest.raises(EmbeddingError, match=r"HTTP 404.*no route"):
        emb.embed_query("q")
    assert server.state.auth == [None]  # no key, no Authorization header


def test_read_timeout_then_success(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", Fault(stall_s=1.5))
    emb = make(server, sleeps, timeout_s=0.3)
    vec = emb.embed_query("q")
    np.testing.assert_allclose(vec, expected(["q"])[0], atol=1e-6)
    assert server.state.count("q") == 2
    assert sleeps == [1.0]


def test_backoff_schedule_doubles_and_caps(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", *[Fault(503)] * 6)
    make(server, sleeps, max_retries=6).embed_query("q")
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert server.state.count("q") == 7


def test_gives_up_after_max_retries(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", *[Fault(502)] * 10)
    with pytest.raises(EmbeddingError, match=r"gave up after 4 attempts.*HTTP 502"):
        make(server, sleeps, max_retries=3).embed_query("q")
    assert sleeps == [1.0, 2.0, 4.0]
    assert server.state.count("q") == 4


def test_jitter_stays_within_25_percent(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", *[Fault(500)] * 2)
    make(server, sleeps, rng=lambda: 0.0).embed_query("q")
    assert sleeps == [0.75, 1.5]


def test_connection_refused_is_retried_then_reported(sleeps: list[float]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again below: nothing listens there
    emb = OpenAIEmbedder(
        f"http://127.0.0.1:{port}/v1", "", "m", max_retries=2, sleep=sleeps.append, rng=lambda: 0.5
    )
    with pytest.raises(EmbeddingError, match=r"gave up after 3 attempts.*ConnectError"):
        emb.embed_query("q")
    assert sleeps == [1.0, 2.0]


def test_dimension_probed_once_then_fingerprinted(
    server: EmbeddingsServer, sleeps: list[float]
) -> None:
    emb = make(server, sleeps)
    assert emb.dimension == DIM
    assert emb.dimension == DIM
    assert len(server.state.requests) == 1
    fp = emb.fingerprint
    assert fp.name == f"openai:test-embed@{server.base_url}"
    assert fp.dimension == DIM
    assert fp.digest == hashlib.sha256(f"{fp.name}{DIM}".encode()).hexdigest()
    assert emb.embed_documents([]).shape == (0, DIM)


def test_configured_dimension_skips_the_probe_and_is_checked(
    server: EmbeddingsServer, sleeps: list[float]
) -> None:
    emb = make(server, sleeps, dimension=16)
    assert emb.dimension == 16
    assert server.state.requests == []
    with pytest.raises(EmbeddingError, match="returned 8-dimensional vectors, expected 16"):
        emb.embed_query("q")


def test_malformed_response_is_an_error(server: EmbeddingsServer, sleeps: list[float]) -> None:
    server.state.fail("q", Fault(201, body={"data": []}))
    with pytest.raises(EmbeddingError, match="expected 1 items"):
        make(server, sleeps).embed_query("q")


def test_count_tokens_is_the_minilm_approximation(
    server: EmbeddingsServer, sleeps: list[float]
) -> None:
    text = "Embeddings approximate meaning with vectors."
    assert make(server, sleeps).count_tokens(text) == TokenCounter()(text)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="base_url"):
        OpenAIEmbedder("localhost:8000", "", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAIEmbedder("http://localhost:8000/v1", "", "")
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbedder("http://localhost:8000/v1", "", "m", batch_size=0)


def test_window_tokens_from_max_tokens(server: EmbeddingsServer, sleeps: list[float]) -> None:
    assert make(server, sleeps, dimension=DIM).window_tokens == 254
    assert make(server, sleeps, dimension=DIM, max_tokens=8192).window_tokens == 8190
    with pytest.raises(ValueError, match="max_tokens"):
        make(server, sleeps, max_tokens=2)
