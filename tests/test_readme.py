"""The README's two commands against what CI runs, so the two cannot drift.

The first two lines of the README's opening ``bash`` block are the commands a
new user copies: install and run, then install the test set and run the tests.
``.ci/run`` must install the same extras and pins and run the same test command,
and neither may compile anything.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import tomllib
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The first two lines of the README's first fenced ``bash`` block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```bash\n(.*?)^```", text, re.S | re.M)
    assert block, "README.md has no ```bash block"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(lines) >= 2, lines
    return lines[:2]


def steps(line: str) -> list[list[str]]:
    """The ``&&``-joined commands of one shell line, each split into words."""
    return [shlex.split(part) for part in line.split(" && ")]


def ci_commands() -> list[list[str]]:
    """The commands .ci/run runs at its top level, variables it sets expanded."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    variables = dict(re.findall(r'^([A-Z_]+)="([^"]*)"$', script, re.M))
    commands = []
    for raw in script.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or raw.startswith((" ", "\t")):
            continue
        for name, value in variables.items():
            line = line.replace(f"${{{name}}}", value).replace(f"${name}", value)
        commands.append(shlex.split(line))
    return commands


def pip_installs(commands: list[list[str]]) -> list[list[str]]:
    """``pip install`` commands without the quiet flag (CI's only difference)."""
    return [[w for w in c if w != "-q"] for c in commands if c[:2] == ["pip", "install"]]


def test_the_test_command_installs_what_ci_installs() -> None:
    readme = pip_installs(steps(readme_commands()[1]))
    ci = pip_installs(ci_commands())
    assert readme == ci
    extras = re.fullmatch(r"\.\[(.*)\]", readme[0][3])
    assert extras, readme[0]
    assert {"dev", "local"} <= set(extras.group(1).split(","))


def test_the_test_command_runs_what_ci_runs() -> None:
    readme_test = steps(readme_commands()[1])[-1]
    assert readme_test[0] == "pytest"
    assert readme_test in ci_commands()
    assert ci_commands()[-1] == readme_test  # CI ends with it, after style and types


def test_nothing_compiles_and_ci_requires_the_data() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    for text in (script, *readme_commands()):
        assert "CMAKE" not in text and "llama-cpp-python" not in text
    assert ["export", "RAGLINE_REQUIRE_DATA=1"] in ci_commands()


def test_the_first_command_ingests_the_sample_corpus_and_asks() -> None:
    first = steps(readme_commands()[0])
    assert ["pip", "install", "-e", "."] in first
    ingest = next(c for c in first if c[:2] == ["ragline", "ingest"])
    assert (REPO / ingest[2]).is_dir() and any((REPO / ingest[2]).glob("*.md"))
    assert first[-1][:2] == ["ragline", "ask"] and first[-1][2].endswith("?")


# ragline is installed from its clone, not from PyPI: `pip install ragline` and
# `pip install 'ragline[x]'` fail. Any spelling of either, quoted or not.
PYPI_INSTALL = re.compile(r"""pip3?\s+install\s+(?:-[-\w]+\s+)*["']?ragline(?:\[|["'\s`]|$)""")
EDITABLE = re.compile(r"""pip3?\s+install\s+-e\s+["']?[./\w-]*?\.?\[(?P<extras>[\w,-]+)\]""")


def install_texts() -> dict[str, str]:
    """Everything a user reads an install command from: the README, docs/, and the
    error messages of the package (src/)."""
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    files += sorted((REPO / "src").rglob("*.py"))
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in files}


def test_install_commands_work_from_a_clone() -> None:
    texts = install_texts()
    wrong = [
        f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for name, text in texts.items()
        for m in PYPI_INSTALL.finditer(text)
    ]
    assert not wrong, "install from the clone (pip install -e '.[extra]'):\n" + "\n".join(wrong)
    # ... and every extra an editable install names exists in pyproject.toml.
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    known = set(pyproject["project"]["optional-dependencies"])
    named = {
        (name, extra)
        for name, text in texts.items()
        for m in EDITABLE.finditer(text)
        for extra in m.group("extras").split(",")
        if "{" not in extra
    }
    assert len(named) > 10, named
    assert not [(n, e) for n, e in named if e not in known], known


def test_the_install_pattern_catches_the_pypi_forms() -> None:
    """The check above is not vacuous: the forms the docs had are caught, the clone's
    forms are not."""
    for bad in [
        "pip install ragline",
        "pip install 'ragline[office,ocr,pdf]'",
        'pip install "ragline[postgres]"',
        "`pip install -U ragline`",
    ]:
        assert PYPI_INSTALL.search(bad), bad
    for good in ["pip install -e .", "pip install -e '.[office]'", "pip install ragline-extra"]:
        assert not PYPI_INSTALL.search(good), good


def readme_sample() -> ModuleType:
    """scripts/readme_sample.py, which writes the README's sample output."""
    spec = importlib.util.spec_from_file_location(
        "readme_sample", REPO / "scripts" / "readme_sample.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sample_output_is_what_the_first_command_prints(tmp_path: Path) -> None:
    """The README's sample against a fresh run of its first command's ragline part
    (ingest docs/, ask the question) at 80 columns. The seconds and scores vary;
    the counts, the answer's first sentence and the sources must not."""
    sample = readme_sample()
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    fresh = sample.run_sample(readme, tmp_path)
    shown = sample.readme_block(readme)
    got, want = sample.stable(shown), sample.stable(fresh)
    assert want["counts"]["files found"] > 10 and want["sources"], want  # parsed
    assert got == want, "README sample output is stale: python scripts/readme_sample.py"
    assert shown.splitlines()[0] == fresh.splitlines()[0]  # the command, as the README has it
    assert max(map(len, shown.splitlines()[1:])) <= 80 + 1, shown  # rich pads a title
