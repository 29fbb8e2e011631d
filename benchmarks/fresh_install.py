"""A newcomer's very first minutes: the README's first command in a fresh clone, in
a fresh virtual environment, timed (wall and CPU seconds) phase by phase.

The command is read from the README (the first line of its first ``bash`` block,
which tests/test_readme.py keeps equal to what the README promises) and split at
its first ``ragline`` call into the install (venv + ``pip install -e .``) and the
main job (ingest ``docs/`` + the first ``ragline ask``). The ask then runs once
more (a second, warm run: page cache filled). CPU = user + system seconds of every
process a phase started. pip downloads from the machine's package index, so the
install's wall time depends on the network as much as on the machine.

    python benchmarks/fresh_install.py --out benchmarks/results/fresh_install.md
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import REPO, emit
from machine import command_line, load_average, machine_lines


def readme_first_command(readme: Path) -> str:
    """The first line of the README's first ```bash block."""
    block = re.search(r"```bash\n(.+?)\n", readme.read_text(encoding="utf-8"))
    if block is None:
        raise SystemExit(f"{readme}: no ```bash block")
    return block.group(1)


def phases(command: str) -> list[tuple[str, str]]:
    """(label, shell command) of the install and the main job."""
    install, sep, job = command.partition(" && ragline ")
    if not sep:
        raise SystemExit(f"the README's first command runs no ragline: {command}")
    job = "ragline " + job
    ask = job[job.index("ragline ask") :] if "ragline ask" in job else job
    return [
        ("install: venv + pip", install),
        ("main job: ingest docs/ + first ask (cold)", f". .venv/bin/activate && {job}"),
        ("the same ask again (warm)", f". .venv/bin/activate && {ask}"),
    ]


def timed(command: str, cwd: Path, log: Path) -> tuple[float, float, int]:
    """Wall s, CPU s of all child processes, exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with log.open("ab") as out:
        rc = subprocess.run(["bash", "-c", command], cwd=cwd, stdout=out, stderr=out).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, rc


def venv_size(clone: Path) -> tuple[int, float]:
    """Packages installed and the venv's size in MiB."""
    listed = subprocess.run(
        [str(clone / ".venv/bin/pip"), "list", "--format=freeze"], capture_output=True, text=True
    ).stdout.split()
    size = sum(p.stat().st_size for p in (clone / ".venv").rglob("*") if p.is_file())
    return len(listed), size / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="the clone's source (git URL/path)")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-fresh-"))
    clone, log = work / "ragline", work / "log.txt"
    subprocess.run(["git", "clone", "-q", str(a.repo), str(clone)], check=True)
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    command = readme_first_command(clone / "README.md")
    loads = [load_average()[0]]
    rows = []
    for label, cmd in phases(command):
        wall, cpu, rc = timed(cmd, clone, log)
        loads.append(load_average()[0])
        rows.append((label, wall, cpu, rc))
        if rc != 0:
            break
    packages, mib = venv_size(clone)
    lines = [
        "# A fresh clone: the README's first command",
        "",
        "Produced by `benchmarks/fresh_install.py` (issue 26): a `git clone`, then the "
        "README's first command in it, phase by phase; CPU = user + system seconds of "
        "every process the phase started.",
        "",
        "## Setup",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- clone: `{head}`; the README's first command: `{command}`",
        "- pip: the machine's package index (downloads included in the install's wall time)",
        "",
        "| phase | wall s | CPU s | exit |",
        "|---|---:|---:|---:|",
        *(f"| {label} | {wall:.1f} | {cpu:.1f} | {rc} |" for label, wall, cpu, rc in rows),
        "",
        f"The virtual environment: {packages} packages, {mib:,.0f} MiB.",
    ]
    if a.keep:
        print(f"clone kept: {clone}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    emit("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
