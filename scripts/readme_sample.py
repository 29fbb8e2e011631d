"""Regenerate the README's sample output: run the ragline part of its first command
(``ragline ingest docs && ragline ask "…"``) in a fresh copy of docs/, at 80 columns,
and write what it printed into the README's ``text`` block.

    python scripts/readme_sample.py          # rewrite README.md
    python scripts/readme_sample.py --check  # exit 1 when the stable parts differ

The run's folder is shown as /tmp/fresh/ragline, the fresh clone the README's text
names. tests/test_readme.py runs the same commands and checks the README's block
against them (file and chunk counts, the answer's first sentence, the sources);
the seconds vary from run to run and are not compared.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHOWN_ROOT = "/tmp/fresh/ragline"
# The block follows this sentence of the README.
LEAD = "What the first command prints after `pip`"
BLOCK = re.compile(rf"({re.escape(LEAD)}.*?```text\n)(.*?)(^```)", re.S | re.M)


def first_command(readme: str) -> list[str]:
    """The ragline steps of the README's first command, as written there."""
    block = re.search(r"^```bash\n(.*?)^```", readme, re.S | re.M)
    assert block, "README.md has no ```bash block"
    line = next(x for x in block.group(1).splitlines() if x.strip())
    return [part for part in line.split(" && ") if part.startswith("ragline ")]


def run_sample(readme: str, workdir: Path) -> str:
    """What the README's ragline commands print in a fresh copy of docs/ at 80 columns."""
    root = workdir / "ragline"
    shutil.copytree(REPO / "docs", root / "docs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
    env.update(COLUMNS="80", PYTHONPATH=str(REPO / "src"))
    steps = first_command(readme)
    out = [f"$ {' && '.join(steps)}\n"]
    for step in steps:
        result = subprocess.run(
            [sys.executable, "-m", "ragline", *shlex.split(step)[1:]],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{step} failed:\n{result.stdout}{result.stderr}")
        out.append(result.stdout)
    return "".join(out).replace(str(root), SHOWN_ROOT)


def readme_block(readme: str) -> str:
    m = BLOCK.search(readme)
    assert m, f"README.md has no ```text block after {LEAD!r}"
    return m.group(2)


def with_block(readme: str, sample: str) -> str:
    m = BLOCK.search(readme)
    assert m, f"README.md has no ```text block after {LEAD!r}"
    return readme[: m.start(2)] + sample.rstrip("\n") + "\n" + readme[m.end(2) :]


def stable(sample: str) -> dict[str, Any]:
    """The parts of a sample that do not change from run to run: the ingest's file and
    chunk counts, the answer's first sentence and the sources (number, label, path)."""
    counts = {
        label: int(m.group(1).replace(",", ""))
        for label in ("files found", "chunks written", "chunks in the index")
        if (m := re.search(rf"│ {label}\s+│\s+([\d,]+) │", sample))
    }
    lines = sample.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("report saved to")) + 1
    end = next(i for i, x in enumerate(lines) if x.startswith("confidence:"))
    answer = " ".join(" ".join(lines[start:end]).split())
    first = re.split(r"(?<=[.!?])\s", answer, maxsplit=1)[0]
    sources: list[tuple[int, str, str]] = []
    at = lines.index("sources") + 1 if "sources" in lines else len(lines)
    entry: list[str] = []
    for line in [*lines[at:], ""]:
        if line.startswith("      ") and entry:
            entry.append(line.strip())
            continue
        if entry:
            # label lines, then the path on a line of its own (an older layout: one line)
            path = entry.pop() if len(entry) > 1 else ""
            head = re.match(r"\[(\d+)\] (.*)", " ".join(entry))
            if head:
                label = re.sub(r"\s+\d\.\d{4}$", "", head.group(2))
                sources.append((int(head.group(1)), label, path))
        entry = [line.strip()] if re.match(r"^  \[\d+\] ", line) else []
    return {"counts": counts, "first_sentence": first, "sources": sources}


def main(argv: list[str]) -> int:
    readme = README.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="ragline-readme-") as tmp:
        sample = run_sample(readme, Path(tmp))
    if "--check" in argv:
        same = stable(sample) == stable(readme_block(readme))
        print("README sample output is current" if same else "README sample output is stale")
        return 0 if same else 1
    README.write_text(with_block(readme, sample), encoding="utf-8")
    print(f"README.md: sample output rewritten ({len(sample.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
