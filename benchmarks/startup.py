"""A newcomer's first commands, in CPU seconds: `ragline --help`, a cold `ragline
search` on a small index, an ingest of a 150-page MkDocs-style site (with progress
samples) and its unchanged re-ingest, plus the `-X importtime` top modules.

Issue 26 ("the first hour with ragline") measured `--help` at 1.2–1.7 CPU-s and a
cold search at 4.9–6.5. Each command runs as its own process (`python -m ragline`)
and is charged the CPU time (user + system) of that process, which a loaded shared
machine inflates far less than wall time; medians of ``--repeats``.

``--src DIR`` (repeatable) runs everything once per source tree, interleaved, so a
before/after pair shares the machine's load, e.g. the tree before the change::

    git archive integration src | tar -x -C /tmp/base
    python benchmarks/startup.py --src /tmp/base/src --src src --out benchmarks/results/startup.md
"""

from __future__ import annotations

import argparse
import os
import pty
import random
import re
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, emit
from machine import command_line, load_average, machine_lines

TOPICS = ["install", "configure", "deploy", "monitor", "backup", "upgrade", "secure", "tune"]
WORDS = [
    *("cluster", "node", "replica", "shard", "token", "cache", "index", "query"),
    *("queue", "worker", "volume", "snapshot", "policy", "quota", "gateway", "route"),
    *("certificate", "secret", "metric", "alert"),
]
EMBEDDED = re.compile(r"chunks embedded ([\d,]+) / ([\d,]+)")


def mkdocs_site(root: Path, pages: int = 150, seed: int = 26) -> Path:
    """A MkDocs-style site: mkdocs.yml, docs/ with a section folder per topic, pages
    with front matter, nested headings, admonitions, code blocks and tables."""
    rng = random.Random(seed)
    docs = root / "docs"
    docs.mkdir(parents=True)
    nav = []
    for n in range(pages):
        topic = TOPICS[n % len(TOPICS)]
        folder = docs / topic
        folder.mkdir(exist_ok=True)
        name = f"page-{n:03d}.md"
        nav.append(f"  - {topic}/{name}")

        def sentence(topic: str = topic) -> str:
            words = rng.choices(WORDS, k=rng.randint(8, 16))
            return f"The {topic} step sets {' '.join(words)}."

        parts = [f"---\ntitle: How to {topic} part {n}\n---\n\n# How to {topic}, part {n}\n"]
        for s in range(rng.randint(2, 4)):
            parts.append(f"## Step {s + 1}: {rng.choice(WORDS)} {rng.choice(WORDS)}\n")
            parts.append(" ".join(sentence() for _ in range(rng.randint(4, 9))) + "\n")
            if rng.random() < 0.5:
                parts.append(f'!!! note "About {rng.choice(WORDS)}"\n    {sentence()}\n')
            if rng.random() < 0.4:
                parts.append(f"```bash\nragline-demo {topic} --{rng.choice(WORDS)}={s}\n```\n")
            if rng.random() < 0.3:
                rows = "\n".join(
                    f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} |" for _ in range(3)
                )
                parts.append(f"| setting | value |\n|---|---|\n{rows}\n")
            parts.append(f"### Details of step {s + 1}\n\n{sentence()} {sentence()}\n")
        (folder / name).write_text("\n".join(parts), encoding="utf-8")
    (docs / "index.md").write_text("# Demo docs\n\nStart with the install section.\n")
    (root / "mkdocs.yml").write_text("site_name: Demo\nnav:\n" + "\n".join(nav) + "\n")
    return docs


def small_corpus(root: Path, files: int = 10) -> Path:
    root.mkdir(parents=True)
    for i in range(files):
        body = " ".join(f"Observation {i}.{k} about glaciers at field site {k}." for k in range(40))
        (root / f"note-{i:02d}.md").write_text(f"# Note {i}\n\n## Field work\n\n{body}\n")
    return root


def run(src: Path, args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """CPU seconds (user + system) and wall seconds of ``python -m ragline ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragline", *args],
        env={**env, "PYTHONPATH": str(src)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu, wall, done.returncode


def ingest_with_progress(
    src: Path, docs: Path, env: dict[str, str], every_s: float
) -> tuple[float, float, list[tuple[float, str]]]:
    """Ingest with stderr on a terminal (as a person sees it); the progress line
    sampled every ``every_s`` seconds. Returns CPU s, wall s and the samples."""
    main, sub = pty.openpty()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragline", "ingest", str(docs)],
        env={**env, "PYTHONPATH": str(src), "COLUMNS": "160"},
        stdout=subprocess.DEVNULL,
        stderr=sub,
    )
    os.close(sub)
    samples: list[tuple[float, str]] = []
    shown, next_at = "", every_s
    while True:
        ready, _, _ = select.select([main], [], [], 0.2)
        if ready:
            try:
                shown = (shown + os.read(main, 65536).decode(errors="replace"))[-4000:]
            except OSError:
                break
        now = time.perf_counter() - t0
        if now >= next_at:
            found = EMBEDDED.findall(shown)
            if found:
                samples.append((now, f"{found[-1][0]} / {found[-1][1]}"))
            next_at += every_s
        if proc.poll() is not None and not ready:
            break
    proc.wait()
    os.close(main)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, f"ingest failed ({proc.returncode})"
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall, samples


def importtime_top(src: Path, code: str, env: dict[str, str], top: int) -> list[tuple[int, str]]:
    """The ``top`` modules by cumulative import time (µs) for ``python -c CODE``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        env={**env, "PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}" if xs else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", type=Path, help="source tree(s) to run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--pages", type=int, default=150)
    ap.add_argument("--sample-s", type=float, default=5.0, help="progress sample interval")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    trees = [p.resolve() for p in (a.src or [REPO / "src"])]
    loads = [load_average()[0]]
    work = Path(tempfile.mkdtemp(prefix="ragline-startup-"))
    small = small_corpus(work / "small")
    docs = mkdocs_site(work / "site", a.pages)
    # Python's bytecode cache on, as an installed package has it (a workplace that sets
    # PYTHONDONTWRITEBYTECODE would charge every command the compiling of ragline's source)
    base_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("RAGLINE_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    cpu: dict[tuple[str, Path], list[float]] = {}
    wall: dict[tuple[str, Path], list[float]] = {}
    samples: dict[Path, list[tuple[float, str]]] = {}

    def record(what: str, tree: Path, c: float, w: float) -> None:
        cpu.setdefault((what, tree), []).append(c)
        wall.setdefault((what, tree), []).append(w)

    for tree in trees:  # the small index for the searches, one per tree
        env = {**base_env, "RAGLINE_INDEX_DIR": str(work / f"small-{trees.index(tree)}")}
        assert run(tree, ["ingest", str(small)], env)[2] == 0
    for _ in range(a.repeats):
        for tree in trees:
            i = trees.index(tree)
            env = {**base_env, "RAGLINE_INDEX_DIR": str(work / f"small-{i}")}
            c, w, rc = run(tree, ["--help"], env)
            record("`ragline --help`", tree, c, w)
            c, w, rc = run(tree, ["search", "glaciers at field site 7"], env)
            assert rc == 0, "search failed"
            record("cold `ragline search` (10-file index)", tree, c, w)
            loads.append(load_average()[0])
    for tree in trees:
        env = {**base_env, "RAGLINE_INDEX_DIR": str(work / f"site-{trees.index(tree)}")}
        c, w, samples[tree] = ingest_with_progress(tree, docs, env, a.sample_s)
        record(f"ingest of the {a.pages}-page MkDocs site (new index)", tree, c, w)
        loads.append(load_average()[0])
    for _ in range(max(1, a.repeats // 2)):
        for tree in trees:
            env = {**base_env, "RAGLINE_INDEX_DIR": str(work / f"site-{trees.index(tree)}")}
            c, w, rc = run(tree, ["ingest", str(docs)], env)
            assert rc == 0
            record(f"unchanged re-ingest of the {a.pages}-page site", tree, c, w)
        loads.append(load_average()[0])

    names = [str(t.relative_to(REPO)) if t.is_relative_to(REPO) else str(t) for t in trees]
    lines = [
        "# Start-up: a newcomer's first commands",
        "",
        f"Produced by `benchmarks/startup.py` (issue 26). Each command is its own process "
        f"(`python -m ragline …`); CPU = user + system seconds of that process, median of "
        f"{a.repeats} (the ingest: 1 run; the re-ingest: {max(1, a.repeats // 2)}); wall "
        "seconds beside, which the shared machine's load inflates. Python's bytecode "
        "cache is on (written by each tree's first command, the small index's ingest).",
        "",
        "## Setup",
        "",
        *machine_lines(loads),
        f"- command: `{command_line()}`",
        f"- source trees: {', '.join(f'`{n}`' for n in names)}",
        f"- small index: 10 Markdown notes; site: {a.pages} pages in 8 sections with front "
        "matter, admonitions, code blocks and tables (generated, seed 26)",
        "",
        "## CPU seconds (wall seconds)",
        "",
        "| command | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for what in dict.fromkeys(w for w, _ in cpu):
        cells = [f"{med(cpu[(what, t)])} ({med(wall[(what, t)])})" for t in trees]
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    for tree, name in zip(trees, names, strict=True):
        lines += ["", f"## Ingest progress samples, `{name}`", ""]
        lines += ["| seconds | chunks embedded / known so far |", "|---|---|"]
        lines += [f"| {t:.0f} | {s} |" for t, s in samples[tree]] or ["| – | – |"]
    for tree, name in zip(trees, names, strict=True):
        index = work / f"small-{trees.index(tree)}"
        env = {**base_env, "RAGLINE_INDEX_DIR": str(index)}
        for label, code in (
            ("import ragline.cli", "import ragline.cli"),
            (
                "a cold search's modules",
                "import ragline.cli, ragline.engine, ragline.store.lance, ragline.embed.onnx",
            ),
        ):
            lines += ["", f"## `-X importtime` top 12, {label}, `{name}`", ""]
            lines += ["| cumulative ms | module |", "|---|---|"]
            for us, mod in importtime_top(tree, code, env, 12):
                lines.append(f"| {us / 1000:.0f} | `{mod.strip()}` |")
    shutil.rmtree(work, ignore_errors=True)
    emit("\n".join(lines) + "\n", a.out)


if __name__ == "__main__":
    main()
