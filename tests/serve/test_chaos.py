"""Chaos: while a folder is ingested and 20 clients ask questions, the store is
stopped and started again, the language model answers 429, then 500, then hangs,
and the disk fills and empties. Every request must get a 2xx, or a 503/429 that
says why; afterwards one more ingest must leave exactly the chunks of a clean
ingest of the same folder.

The faults are driven by the ingest's own progress (the callback fires after each
file), not by timers, so every run crosses each fault at the same point of the
ingest whatever the machine's speed. Two stores: a real PostgreSQL (stopped with
``pg_ctl -m immediate``, as a crash, and started again; the index folder with the
query log and conversations on a small tmpfs that fills) and LanceDB (the whole
index on the tmpfs, so the full disk hits the store's own writes).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.embed.base import Embedder
from ragline.engine import Ragline
from ragline.ingest.progress import IngestProgress
from ragline.settings import Settings
from ragline.store.base import Store

from .conftest import LiveServer, _scripted, sse_events, start_server, stop_server

TOPICS = ("gradient descent", "attention", "convolution", "dropout", "momentum", "entropy")
QUESTIONS = tuple(f"What does file {i} say about {t}?" for i, t in enumerate(TOPICS))
#: What a client may see besides a 2xx: documented statuses, each with an error code
#: and a message saying why.
DOCUMENTED = {429, 503}
#: Internals no body may show; an error's body neither a path (a hit's ``source``
#: is the document's own path, so answers may hold one).
INTERNALS = ("Traceback", "SELECT ", "psycopg", "lancedb", "LanceError", "Errno", "sqlite3")
PATHS = ("/tmp/",)
FILES = 16
#: The notice an answer carries while the language model fails each way.
NOTICES = {
    "429": "busy (it is rate limited)",
    "500": "busy (it answered with a server error)",
    "hang": "busy (it did not answer in time)",
}
DISK_MB = 48


def _corpus(root: Path) -> Path:
    root.mkdir()
    for i in range(FILES):
        topic = TOPICS[i % len(TOPICS)]
        parts = [f"# File {i} on {topic}\n"]
        for s in range(3):
            sentences = (
                f"Sentence {n} of part {s} in file {i} says how {topic} behaves in case {n}."
                for n in range(10)
            )
            parts.append(f"\n## Part {s} of file {i}\n\n{' '.join(sentences)}\n")
        (root / f"f{i:02d}.md").write_text("".join(parts))
    return root


def _in_ci() -> bool:
    return os.environ.get("RAGLINE_REQUIRE_DATA") == "1" or bool(os.environ.get("CI"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A ``DISK_MB`` tmpfs the test fills: root mounts one; elsewhere the test skips
    (CI runs as root, and there it fails instead)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    why = "mounting a tmpfs needs root"
    if os.geteuid() == 0:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(disk)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode == 0:
            try:
                yield disk
            finally:
                subprocess.run(["umount", "-l", str(disk)], check=False)
            return
        why = f"mount -t tmpfs failed: {done.stderr.strip()}"
    if _in_ci():
        pytest.fail(f"the chaos test needs a small disk to fill: {why}")
    pytest.skip(f"the chaos test needs a small disk to fill: {why}")


class Disk:
    """Fills a mounted file system to the last byte and frees it again."""

    def __init__(self, root: Path) -> None:
        self.filler = root / "filler"

    def fill(self) -> None:
        block = b"\0" * (1 << 20)
        with self.filler.open("wb") as f:
            try:
                while True:
                    f.write(block)
                    f.flush()
            except OSError:
                pass
        for i in range(1 << 16):  # the last pages, below one block
            try:
                (self.filler.parent / f"filler-{i}").write_bytes(b"\0" * 4096)
            except OSError:
                break

    def free(self) -> None:
        for path in self.filler.parent.glob("filler*"):
            path.unlink()


@dataclass
class Seen:
    """Every response the clients got: (endpoint, status, body)."""

    rows: list[tuple[str, int, str]] = field(default_factory=list)
    lock: threading.Condition = field(default_factory=threading.Condition)

    def add(self, endpoint: str, status: int, body: str) -> None:
        with self.lock:
            self.rows.append((endpoint, status, body))
            self.lock.notify_all()

    def wait_for(self, phrase: str, timeout: float = 90.0) -> None:
        """Until a response holds ``phrase`` (the check afterwards says if none did)."""
        with self.lock:
            self.lock.wait_for(lambda: any(phrase in b for _, _, b in self.rows), timeout)


def _client(url: str, stop: threading.Event, seen: Seen, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=120) as c:
        while not stop.is_set():
            question = rng.choice(QUESTIONS)
            kind = rng.choice(("query", "search", "chat"))
            try:
                if kind == "query":
                    r = c.post("/api/query", json={"question": question})
                    seen.add(kind, r.status_code, r.text)
                elif kind == "search":
                    r = c.post("/api/search", json={"query": question})
                    seen.add(kind, r.status_code, r.text)
                else:
                    with c.stream("POST", "/api/chat", json={"message": question}) as s:
                        seen.add(kind, s.status_code, "".join(s.iter_text()))
            except httpx.HTTPError as e:  # a dropped connection is a failure too
                seen.add(kind, 0, f"{type(e).__name__}: {e}")
            stop.wait(rng.uniform(0.1, 0.5))


class Chaos:
    """The faults, switched on and off at fixed points of the ingest (files done)."""

    def __init__(self, steps: dict[int, Callable[[], None]]) -> None:
        self.steps = steps
        self.done: list[int] = []

    def __call__(self, event: IngestProgress) -> None:
        for at in sorted(self.steps):
            if event.files_done >= at and at not in self.done:
                self.done.append(at)
                self.steps[at]()


def _snapshot(store: Store) -> list[tuple[str, str, str]]:
    return sorted(
        (c.id, c.content_hash, c.text) for batch, _ in store.iter_chunks(256) for c in batch
    )


def _check_responses(seen: Seen) -> None:
    assert len(seen.rows) >= 40, f"only {len(seen.rows)} requests ran during the chaos"
    for endpoint, status, body in seen.rows:
        assert status != 0, f"{endpoint}: {body}"
        assert 200 <= status < 300 or status in DOCUMENTED, f"{endpoint} {status}: {body[:500]}"
        leaks = INTERNALS if status < 300 else INTERNALS + PATHS
        assert not any(word in body for word in leaks), f"{endpoint} {status}: {body[:800]}"
        if status in DOCUMENTED:
            error = httpx.Response(status, content=body.encode()).json()
            assert error.get("error") and error.get("message"), body
        elif endpoint == "chat":
            events = sse_events(body)
            names = [name for name, _ in events]
            assert names and names[-1] in {"done", "error"}, body[-500:]
            if names[-1] == "error":  # an error event carries a status like a response's
                error = events[-1][1]
                assert error.get("status_code") in DOCUMENTED, body[-500:]
                assert error.get("message"), body[-500:]
    assert any(status == 200 for _, status, _ in seen.rows)
    answers = [  # the answers (plain and streamed) that may carry a notice
        body for endpoint, status, body in seen.rows if endpoint != "search" and status == 200
    ]
    met = sorted({m for body in answers for m in re.findall(r"busy \([^)]*\)", body)})
    generators = sorted({m for body in answers for m in re.findall(r'"generator": ?"(\w+)"', body)})
    for mode, notice in NOTICES.items():
        assert any(notice in body for body in answers), (
            f"no answer met the LLM's {mode}: {len(answers)} answers, notices {met}, "
            f"generators {generators}"
        )


def _failed_writes(outcome: Any) -> list[str]:
    """The first ingest's files whose write failed (all of them when it raised)."""
    if isinstance(outcome, Exception):
        assert str(outcome), f"the ingest ended without saying why: {outcome!r}"
        return ["*"]
    return [f.reason for f in outcome.failed if "store write failed" in f.reason]


def _run_chaos(
    live: LiveServer, corpus: Path, steps: dict[int, Callable[[], None]], seen: Seen
) -> Any:
    """Ingest ``corpus`` through the server's engine with the faults in ``steps``
    while 20 clients ask; the first ingest's report (or the error it raised)."""
    stop = threading.Event()
    clients = [
        threading.Thread(target=_client, args=(live.url, stop, seen, i), daemon=True)
        for i in range(20)
    ]
    for t in clients:
        t.start()
    chaos = Chaos(steps)
    try:
        try:
            outcome: Any = live.rag.ingest(corpus, progress=chaos)
        except Exception as e:  # a fault may end the run: it must say why
            outcome = e
        for at in sorted(set(steps) - set(chaos.done)):  # a run ended early: undo its faults
            chaos.done.append(at)
            steps[at]()
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=180)
    assert not any(t.is_alive() for t in clients), "a client hung"
    return outcome


class ModeLLM:
    """The scripted OpenAI-compatible server answering by the current mode: ``ok``,
    ``429``, ``500`` or ``hang`` (past the generation deadline)."""

    def __init__(self) -> None:
        mod = _scripted()
        self.mode = "ok"
        self.llm = mod.ScriptedLLM()
        self.llm.next = self.next
        from http.server import ThreadingHTTPServer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), mod._handler(self.llm))
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def switch(self, mode: str, seen: Seen) -> Callable[[], None]:
        """A step: once a client got the answer the current fault should give (its
        notice; so each fault meets answers whatever the timing), answer in ``mode``.
        A request retried across a switch says the first fault it met."""

        def step() -> None:
            if self.mode in NOTICES:
                seen.wait_for(NOTICES[self.mode])
            self.mode = mode

        return step

    def next(self) -> tuple[Any, ...]:
        if self.mode == "429":
            return ("status", 429, {"retry-after": "0"}, "rate limited")
        if self.mode == "500":
            return ("status", 500, {}, "internal error")
        if self.mode == "hang":
            return ("sleep", 4.0)
        return ("stream", ["Each file says how its topic behaves [1]."], "done")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mode_llm() -> Iterator[ModeLLM]:
    llm = ModeLLM()
    yield llm
    llm.close()


def _settings(index: Path, llm: ModeLLM, **extra: Any) -> Settings:
    return Settings(
        index_dir=index, rate_limit_per_minute=0, query_log_salt="s",
        generator="openai", llm_base_url=llm.url, llm_model="scripted", llm_max_retries=1,
        llm_deadline_s=2.0, write_batch_chunks=6, ingest_store_retries=2,
        ingest_store_backoff_s=0.2, store_retry_backoff_s=0.05, warm_retry_s=0.5, **extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _corpus(tmp_path_factory.mktemp("chaos") / "corpus")


@pytest.fixture(scope="module")
def clean(
    tmp_path_factory: pytest.TempPathFactory, corpus: Path, embedder: Embedder
) -> list[tuple[str, str, str]]:
    """The chunks of a clean ingest of ``corpus`` (what every chaos run must end with)."""
    index = tmp_path_factory.mktemp("clean") / "index"
    rag = Ragline(Settings(index_dir=index, write_batch_chunks=6), embedder=embedder)
    try:
        report = rag.ingest(corpus)
        assert not report.failed
        return _snapshot(rag.store)
    finally:
        rag.close()


def _resync_equals_clean(
    live: LiveServer, corpus: Path, clean: list[tuple[str, str, str]], outcome: Any
) -> None:
    assert _failed_writes(outcome), f"no write met the fault: {outcome}"
    again = live.rag.ingest(corpus)
    assert not again.failed, again.failed
    assert _snapshot(live.rag.store) == clean
    assert sorted(d.source for d in live.rag.store.documents()) == sorted(
        str(p) for p in corpus.glob("*.md")
    )


def _schedule(
    llm: ModeLLM, seen: Seen, store: tuple[Callable[[], None], Callable[[], None]], disk: Disk
) -> dict[int, Callable[[], None]]:
    """The faults by files done: the LLM 429, the store down (``store``: take it away,
    bring it back) and up, the LLM 500, the disk full and freed, the LLM hanging, well."""
    down, up = store
    return {
        2: llm.switch("429", seen),
        4: down,
        7: up,
        8: llm.switch("500", seen),
        10: disk.fill,
        12: disk.free,
        13: llm.switch("hang", seen),
        15: llm.switch("ok", seen),
    }


def test_chaos_postgres(
    corpus: Path,
    clean: list[tuple[str, str, str]],
    small_disk: Path,
    embedder: Embedder,
    make_pg_server: Callable[[], Any],
    mode_llm: ModeLLM,
) -> None:
    server = make_pg_server()
    disk = Disk(small_disk)
    settings = _settings(
        small_disk / "index", mode_llm, store_url=server.url(), pg_max_retries=0,
        pg_connect_timeout_s=2,
    )  # fmt: skip
    live = start_server(settings, embedder)
    try:
        seen = Seen()
        crash = (partial(server.stop, "immediate"), server.start)  # stopped as a crash
        outcome = _run_chaos(live, corpus, _schedule(mode_llm, seen, crash, disk), seen)
        if not server.running():
            server.start()
        _check_responses(seen)
        assert any("unavailable" in body for _, _, body in seen.rows), "no request met the outage"
        _resync_equals_clean(live, corpus, clean, outcome)
    finally:
        disk.free()
        if not server.running():
            server.start()
        stop_server(live)


def test_chaos_lance(
    corpus: Path,
    clean: list[tuple[str, str, str]],
    small_disk: Path,
    embedder: Embedder,
    mode_llm: ModeLLM,
) -> None:
    disk = Disk(small_disk)
    live = start_server(_settings(small_disk / "index", mode_llm), embedder)
    try:
        seen = Seen()
        faults = (disk.fill, disk.free)  # the store's own writes meet the full disk
        outcome = _run_chaos(live, corpus, _schedule(mode_llm, seen, faults, disk), seen)
        _check_responses(seen)
        _resync_equals_clean(live, corpus, clean, outcome)
    finally:
        disk.free()
        stop_server(live)


def test_chat_on_a_full_disk_answers_and_says_it_was_not_saved(
    small_disk: Path, docs_index: Path, embedder: Embedder
) -> None:
    """The conversation store's write failing (a full disk) gave a 500 mid-chat: the
    answer stands, and its metadata says the exchange was not saved."""
    index = small_disk / "index"
    shutil.copytree(docs_index, index)
    disk = Disk(small_disk)
    live = start_server(Settings(index_dir=index, rate_limit_per_minute=0), embedder)
    try:
        disk.fill()
        with live.client() as c, c.stream("POST", "/api/chat", json={"message": QUESTIONS[0]}) as s:
            assert s.status_code == 200
            events = sse_events("".join(s.iter_text()))
        name, done = events[-1]
        assert name == "done", events
        assert done["message_id"] is None
        note = done["answer"]["metadata"]["conversation_note"]
        assert "not saved" in note and "disk is full" in note and "/" not in note
    finally:
        disk.free()
        stop_server(live)
