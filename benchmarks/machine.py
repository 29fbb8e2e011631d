"""What a benchmark ran on, and a polite wait for a quiet machine.

The helpers live in the package (:mod:`ragline.eval.machine`, shared with
``ragline bench``); this module re-exports them for the scripts and adds the
script's own command line. Every result table starts with :func:`machine_lines`.
"""

from __future__ import annotations

import shlex
import sys

from ragline.eval.machine import (
    PeakRss,
    Phase,
    busy_cpu_seconds,
    cpu_model,
    dir_bytes,
    load_average,
    machine_info,
    machine_lines,
    memory_gib,
    package_versions,
    wait_for_quiet,
)

__all__ = [
    "PeakRss",
    "Phase",
    "busy_cpu_seconds",
    "command_line",
    "cpu_model",
    "dir_bytes",
    "load_average",
    "machine_info",
    "machine_lines",
    "memory_gib",
    "package_versions",
    "wait_for_quiet",
]


def command_line() -> str:
    """The command as it was typed, relative to the repo root when run from there."""
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)
