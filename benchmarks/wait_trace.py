"""Where a command's wall time goes: running, waiting for a core, or blocked (and on
what), sampled from /proc while it runs.

Issue 26, item 14: the README's first `ragline ask` once took 11 minutes of wall
time for 5 CPU-seconds at load 15, and a second run 46 s. This script answers
"where does it wait" for any command: every 10 ms it reads each thread of the
command's process tree (``/proc/PID/task/TID``): the scheduler's cumulative run and
run-queue wait (``schedstat``), the thread's state, and for a sleeping thread the
system call it sleeps in (``syscall``). The main thread's samples say what the
command waited on; ``--busy N`` starts N busy loops beside it to load the machine
(on 2 cores, 14 give a load of about 15).

    python benchmarks/wait_trace.py --busy 14 --out results/wait_trace.md \\
        --label "ask at load 15" -- ragline ask "how are deleted files removed from the index?"
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import emit
from machine import command_line, load_average, machine_lines

#: x86-64 system call numbers a waiting thread is usually found in.
SYSCALLS = {
    -1: "none: a page fault (a mapped file's page read from disk)",
    0: "read",
    1: "write",
    3: "close",
    9: "mmap",
    11: "munmap",
    7: "poll",
    17: "pread64",
    23: "select",
    35: "nanosleep",
    42: "connect",
    45: "recvfrom",
    61: "wait4",
    72: "fcntl (file lock)",
    73: "flock (file lock)",
    202: "futex (lock, thread join, condition)",
    217: "getdents64 (listing a folder)",
    230: "clock_nanosleep",
    232: "epoll_wait",
    257: "openat",
    262: "newfstatat",
    270: "pselect6",
    271: "ppoll",
    281: "epoll_pwait",
}


@dataclass
class Trace:
    """What the samples of one run saw."""

    run_ns: dict[int, int] = field(default_factory=dict)  # per thread, last reading
    wait_ns: dict[int, int] = field(default_factory=dict)
    main: collections.Counter[str] = field(default_factory=collections.Counter)
    main_tid: int = 0
    samples: int = 0


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (by the ``children`` lists of their threads)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for tid in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else []:
            kids = _read(f"/proc/{pid}/task/{tid}/children") or ""
            todo.extend(int(k) for k in kids.split())
    return found


def _main_pid(root: int) -> int:
    """The deepest single-child descendant of ``root``: the command itself when a
    shell or a console-script wrapper started it."""
    pid = root
    while True:
        kids = (_read(f"/proc/{pid}/task/{pid}/children") or "").split()
        if len(kids) != 1:
            return pid
        pid = int(kids[0])


def _state(stat: str) -> str:
    return stat.rsplit(")", 1)[1].split()[0]


def sample(root: int, trace: Trace) -> None:
    main = _main_pid(root)
    for pid in _tree(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in map(int, tids):
            sched = _read(f"/proc/{pid}/task/{tid}/schedstat")
            if sched is None:
                continue
            run, wait, _ = (int(x) for x in sched.split())
            trace.run_ns[tid], trace.wait_ns[tid] = run, wait
            if tid != main:
                continue
            trace.main_tid = tid
            stat = _read(f"/proc/{pid}/task/{tid}/stat")
            state = _state(stat) if stat else "?"
            call = (_read(f"/proc/{pid}/task/{tid}/syscall") or "").split()
            if state == "R" or call[:1] == ["running"]:  # it woke between the two reads
                trace.main["running or waiting for a core (R)"] += 1
            elif state in ("S", "D") and call[:1] and call[0].lstrip("-").isdigit():
                name = SYSCALLS.get(int(call[0]), f"syscall {call[0]}")
                what = "blocked on I/O (D)" if state == "D" else "sleeping (S)"
                trace.main[f"{what}: {name}"] += 1
            else:
                trace.main[f"state {state}"] += 1
    trace.samples += 1


def _busy() -> None:
    while True:
        pass


def run(command: list[str], busy: int, every_s: float) -> tuple[float, Trace, int]:
    loops = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(busy)]
    for p in loops:
        p.start()
    time.sleep(2.0 if busy else 0.0)  # let the load settle
    trace = Trace()
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        sample(proc.pid, trace)
        time.sleep(every_s)
    wall = time.perf_counter() - t0
    for p in loops:
        p.terminate()
    return wall, trace, proc.returncode


def report(label: str, wall: float, trace: Trace, rc: int) -> list[str]:
    cpu = sum(trace.run_ns.values()) / 1e9
    queued = sum(trace.wait_ns.values()) / 1e9
    lines = [
        f"### {label}",
        "",
        f"- exit {rc}; wall {wall:.1f} s; CPU {cpu:.1f} s (all threads); waiting for a "
        f"core {queued:.1f} s (all threads, run-queue time); {trace.samples} samples",
        f"- main thread: CPU {trace.run_ns.get(trace.main_tid, 0) / 1e9:.1f} s, waiting for "
        f"a core {trace.wait_ns.get(trace.main_tid, 0) / 1e9:.1f} s",
        "",
        "| main thread was | share of samples |",
        "|---|---:|",
    ]
    for what, n in trace.main.most_common():
        lines.append(f"| {what} | {n / max(trace.samples, 1):.0%} |")
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=0, help="busy loops run beside the command")
    ap.add_argument("--every-s", type=float, default=0.01)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--append", action="store_true", help="add a section to --out")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        raise SystemExit("usage: wait_trace.py [options] -- COMMAND …")
    before = load_average()[0]
    wall, trace, rc = run(command, a.busy, a.every_s)
    after = load_average()[0]
    label = a.label or " ".join(command)
    lines = [] if a.append else ["# Where a command waits", "", *machine_lines([before, after])]
    lines += [
        f"- command: `{command_line()}`; {a.busy} busy loops beside it; load average "
        f"(1-min) {before:.1f} before, {after:.1f} after",
        "",
        *report(label, wall, trace, rc),
    ]
    emit("\n".join(lines), a.out, append=a.append)


if __name__ == "__main__":
    main()
