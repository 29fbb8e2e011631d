"""A time and memory budget for parsing one file, so one bad file cannot stall a run.

The size limits in :mod:`ragline.ingest.parse.limits` refuse the shapes we know
are costly; this is the catch-all for the ones we don't. The parse runs in a
long-lived worker process, started as ``python -m ragline.ingest.budget`` (not by
multiprocessing: forking a process that holds onnxruntime or LanceDB threads is
unsafe, and spawn or forkserver children import the caller's main script again,
which breaks a user's script without a ``__main__`` guard), whose address space
is capped with ``RLIMIT_AS``; the parent waits at most the time budget and kills the worker when
it is spent. A killed worker is replaced for the next file, so the other files
are parsed as usual, and nothing is stored for the file over its budget.

Idle workers are kept (one per concurrent caller, at most :data:`_MAX_IDLE`), so the
cost per file is one round trip of its bytes and its parsed document.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from ragline.ingest.errors import IngestError
from ragline.settings import Settings

T = TypeVar("T")

_MAX_IDLE = 2
_START_S = 300  # a worker imports the parsers before it takes a job
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Budget:
    """What one file's parse may cost: wall seconds and MiB of memory (0: no limit).

    Files under ``min_bytes`` parse in the caller's process: their cost is already
    bounded by the size limits, and a round trip to the worker would cost more than
    their parse.
    """

    timeout_s: float = 0.0
    memory_mb: int = 0
    min_bytes: int = 0

    @classmethod
    def of(cls, settings: Settings) -> Budget:
        return cls(
            settings.ingest_file_timeout_s,
            settings.ingest_file_memory_mb,
            settings.ingest_budget_min_bytes,
        )

    def applies(self, size: int) -> bool:
        return (self.timeout_s > 0 or self.memory_mb > 0) and size >= self.min_bytes


def _vm_bytes() -> int:
    """This process's virtual memory size (what RLIMIT_AS caps), 0 where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _serve(conn: Connection, memory_mb: int) -> None:
    """Worker loop: run each job sent, send back ("ok", result) or the error's fields."""
    import ragline.ingest.parse  # noqa: F401  (imported before the cap is measured)

    if memory_mb > 0:
        # the cap is on top of what the worker holds once its parsers are imported
        limit = _vm_bytes() + memory_mb * _MB
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    conn.send("ready")  # the budget counts from here, not from the worker's start
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        fn, args, kwargs = job
        try:
            reply: tuple[Any, ...] = ("ok", fn(*args, **kwargs))
        except MemoryError:
            reply = ("memory",)
        except IngestError as e:
            reply = ("ingest", e.source, e.line, e.reason, e.environment)
        except Exception as e:  # a parser bug: reported as the file's failure
            reply = ("error", f"{type(e).__name__}: {e}")
        del job, fn, args, kwargs
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("memory",))


class _Worker:
    """One parser process and the socket it takes jobs on (pickled, as by
    multiprocessing's own pipes)."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ragline.ingest.budget", str(fd), str(memory_mb)],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        self.conn = Connection(ours.detach())
        if not self.conn.poll(_START_S) or self.conn.recv() != "ready":
            self.kill()
            raise RuntimeError(f"the parser process did not start within {_START_S} s")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.conn.close()


_idle: list[_Worker] = []
_idle_lock = threading.Lock()


def _take(memory_mb: int) -> _Worker:
    with _idle_lock:
        for i, w in enumerate(_idle):
            if w.memory_mb == memory_mb and w.alive():
                return _idle.pop(i)
    return _Worker(memory_mb)


def _give_back(w: _Worker) -> None:
    with _idle_lock:
        if len(_idle) < _MAX_IDLE:
            _idle.append(w)
            return
    w.kill()


def run_budgeted(
    fn: Callable[..., T], source: str, size: int, budget: Budget, *args: Any, **kwargs: Any
) -> T:
    """``fn(*args, **kwargs)`` within ``budget`` for a file of ``size`` bytes (in this
    process when the budget does not apply to it).

    ``fn`` and its arguments must pickle (a module-level function). Raises
    :class:`IngestError` naming ``source``, the limit it went over and the setting that
    raises it; errors ``fn`` raises come back as they were (IngestError) or as an
    IngestError with the exception's type and message.
    """
    if not budget.applies(size):
        return fn(*args, **kwargs)
    w = _take(budget.memory_mb)
    try:
        w.conn.send((fn, args, kwargs))
        timeout = budget.timeout_s if budget.timeout_s > 0 else None
        if not w.conn.poll(timeout):
            w.kill()
            raise IngestError(
                source,
                None,
                f"parsing took longer than {budget.timeout_s:g} s and was stopped "
                "(raise RAGLINE_INGEST_FILE_TIMEOUT_S to ingest it)",
            )
        reply = w.conn.recv()
    except (EOFError, OSError) as e:  # the worker died: killed by the system (OOM)
        w.kill()
        raise IngestError(source, None, _over_memory(budget, "the parser process died")) from e
    except BaseException:
        if w.alive() and not w.conn.closed:
            w.kill()
        raise
    _give_back(w)
    kind = reply[0]
    if kind == "ok":
        result: T = reply[1]
        return result
    if kind == "memory":
        raise IngestError(source, None, _over_memory(budget, "parsing ran out of memory"))
    if kind == "ingest":
        raise IngestError(reply[1], reply[2], reply[3], environment=reply[4])
    raise IngestError(source, None, reply[1])


def _over_memory(budget: Budget, what: str) -> str:
    return (
        f"{what}: over the memory limit of {budget.memory_mb:,} MiB "
        "(raise RAGLINE_INGEST_FILE_MEMORY_MB to ingest it)"
    )


if __name__ == "__main__":  # the worker: python -m ragline.ingest.budget FD MEMORY_MB
    _serve(Connection(int(sys.argv[1])), int(sys.argv[2]))
