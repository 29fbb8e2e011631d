"""What a measurement ran on, how busy the machine was, and how much memory it took.

Timings are only comparable with the machine and the load they were taken
under, so every benchmark report carries :func:`machine_info`; :class:`Phase`
measures the interference (other processes' CPU time) a timed block suffered,
and :class:`PeakRss` the peak resident memory of a block.

Standard library only: the peer benchmarks (``benchmarks/peers``) load this file
by path inside their own virtualenvs, where ragline is not installed.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def machine_info() -> dict[str, Any]:
    """The machine, OS, Python and package versions, and the time (JSON-ready)."""
    return {
        "cores": os.cpu_count() or 1,
        "cpu": cpu_model(),
        "ram_gib": round(memory_gib(), 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": package_versions(),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


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


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux ≥ 4.0: write 5 to
    /proc/self/clear_refs); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM") is not None


def max_rss_bytes() -> int:
    """``ru_maxrss``: the process's peak resident memory since it started."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


@dataclass(slots=True)
class PeakRss:
    """Peak resident memory (RSS, bytes) of the whole process during a block.

    On Linux the kernel's peak mark (``VmHWM``) is reset when the block starts, so
    the figure belongs to the block (``method`` = ``"VmHWM"``), and it counts
    native allocations (LanceDB, ONNX Runtime) that ``tracemalloc`` cannot see.
    Elsewhere it falls back to ``ru_maxrss``, the peak since the process started
    (``method`` = ``"ru_maxrss"``), an upper bound for the block."""

    start: int = 0
    peak: int = 0
    method: str = "ru_maxrss"

    def __enter__(self) -> PeakRss:
        rss = _status_kib("VmRSS")
        self.start = rss * 1024 if rss is not None else 0
        self.method = "VmHWM" if _reset_peak() else "ru_maxrss"
        return self

    def __exit__(self, *exc: object) -> None:
        hwm = _status_kib("VmHWM") if self.method == "VmHWM" else None
        self.peak = hwm * 1024 if hwm is not None else max_rss_bytes()


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (0 when it does not exist)."""
    if not path.exists():
        return 0
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def wait_for_quiet(max_load: float, max_wait_s: float, poll_s: float = 60.0) -> float:
    """Wait (up to ``max_wait_s``) for the 1-minute load to fall to ``max_load``.

    Returns the load when the run starts; if the machine never quietens the run
    goes ahead anyway and the report says how loaded it was.
    """
    deadline = time.monotonic() + max_wait_s
    load = load_average()[0]
    while load > max_load and time.monotonic() < deadline:
        print(f"load {load:.2f} > {max_load}: waiting {poll_s:.0f} s", file=sys.stderr, flush=True)
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
        load = load_average()[0]
    return load


def machine_lines(loads: Sequence[float]) -> list[str]:
    """Markdown bullet lines: the machine, and the 1-minute loads sampled during the run."""
    ones = list(loads) or [0.0]
    m = machine_info()
    return [
        f"- machine: `nproc` = {m['cores']}, CPU {m['cpu']}, RAM {m['ram_gib']} GiB, {m['os']}",
        f"- load average (1-min) during the run: min {min(ones):.2f}, "
        f"max {max(ones):.2f} over {len(ones)} samples "
        f"(shared machine; {m['cores']}.0 = every core busy)",
        f"- Python {m['python']}; {m['packages']}",
        f"- date: {m['date']}",
    ]
