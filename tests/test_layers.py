"""The layers of docs/architecture.md hold: nothing imports upward, no cycles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ragline

SRC = Path(ragline.__file__).resolve().parent.parent


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter that imports this checkout's ragline."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_settings_loads_no_numpy_and_no_other_layer() -> None:
    """Settings sit below every part that uses them: reading them loads neither numpy
    (the store's and the models' runtime) nor any ragline module but the plain types."""
    done = _python(
        "import sys, ragline.settings\n"
        "print(sorted(m for m in sys.modules if m.startswith('ragline')))\n"
        "print('numpy' in sys.modules)\n"
    )
    assert done.returncode == 0, done.stderr
    modules, numpy = done.stdout.splitlines()
    assert modules == "['ragline', 'ragline.settings', 'ragline.types']"
    assert numpy == "False"
