"""What a benchmark ran on, and a polite wait for a quiet machine.

Results are only comparable with the machine and the load they were taken
under, so every result table starts with :func:`machine_lines`. The dev box is
shared; :func:`wait_for_quiet` holds a timing run until the 1-minute load
average drops, so the figures are not mostly other people's tests.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("ragline", "lancedb", "pylance", "onnxruntime", "pyarrow", "numpy", "tokenizers")


def load_average() -> tuple[float, float, float]:
    """1, 5 and 15-minute load averages (zeros where /proc is missing)."""
    try:
        parts = Path("/proc/loadavg").read_text().split()
        return float(parts[0]), float(parts[1]), float(parts[2])
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0, 0.0


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def package_versions(names: Sequence[str] = PACKAGES) -> str:
    out = []
    for name in names:
        try:
            out.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(out)


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat; 0 elsewhere)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:9]
        ticks = [int(x) for x in fields]
    except (OSError, IndexError, ValueError):
        return 0.0
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class Phase:
    """Wall time, this process's CPU time and everyone else's CPU time over a block.

    ``others_share`` is the fraction of the machine's cores that other processes
    used meanwhile: the interference a timing suffered (the load average lags and
    counts this process too, so it cannot tell that)."""

    wall: float = 0.0
    cpu: float = 0.0
    others_cpu: float = 0.0
    _t: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def __enter__(self) -> Phase:
        self._t = (time.perf_counter(), time.process_time(), busy_cpu_seconds())
        return self

    def __exit__(self, *exc: object) -> None:
        t0, c0, b0 = self._t
        self.wall = time.perf_counter() - t0
        self.cpu = time.process_time() - c0
        self.others_cpu = max(0.0, busy_cpu_seconds() - b0 - self.cpu)

    @property
    def others_share(self) -> float:
        return self.others_cpu / (self.wall * (os.cpu_count() or 1)) if self.wall else 0.0


def wait_for_quiet(max_load: float, max_wait_s: float, poll_s: float = 60.0) -> float:
    """Wait (up to ``max_wait_s``) for the 1-minute load to fall to ``max_load``.

    Returns the load when the run starts; if the machine never quietens the run
    goes ahead anyway and the table says how loaded it was.
    """
    deadline = time.monotonic() + max_wait_s
    load = load_average()[0]
    while load > max_load and time.monotonic() < deadline:
        print(f"load {load:.2f} > {max_load}: waiting {poll_s:.0f} s", file=sys.stderr, flush=True)
        time.sleep(poll_s)
        load = load_average()[0]
    return load


def command_line() -> str:
    """The command as it was typed, relative to the repo root when run from there."""
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def machine_lines(loads: Sequence[float]) -> list[str]:
    """Markdown bullet lines: the machine, and the 1-minute loads sampled during the run."""
    ones = list(loads) or [0.0]
    return [
        f"- machine: `nproc` = {os.cpu_count()}, CPU {cpu_model()}, "
        f"RAM {memory_gib():.1f} GiB, {platform.system()} {platform.release()}",
        f"- load average (1-min) during the run: min {min(ones):.2f}, "
        f"max {max(ones):.2f} over {len(ones)} samples "
        "(shared machine; 2.0 = both cores busy)",
        f"- Python {platform.python_version()}; {package_versions()}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
    ]
