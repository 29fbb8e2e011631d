"""Helpers the benchmark scripts share, so each script holds only its measurement.

The machine description and the load wait are in :mod:`machine` (re-exported from
the package); this module has what the scripts used to copy: the shared data
folder, percentiles, JSON lines, the ``ragline eval`` SciFact index of a cache
folder, loading a helper module by path (the test servers), and printing a result
table and writing it out. The scale scripts' corpus is ``search_scale.synthetic_corpus``.

Named ``benchlib``, not ``common``: ``benchmarks/peers/common.py`` is another
module, imported by the peer scripts, and two top-level ``common`` modules would
clash for a type checker run over ``benchmarks/``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ragline.eval.index import MANIFEST

REPO = Path(__file__).resolve().parents[1]
#: Where scripts cache collected rows between runs (git-ignored).
WORK = REPO / "benchmarks" / ".work"


def _shared_data() -> Path:
    env = os.environ.get("RAGLINE_SHARED_DATA")
    found = Path(env) if env else REPO.parent / "shared" / "data"
    return found if found.is_dir() else Path("/work/shared/data")


#: The shared data sets (scifact/, d2l-en/, …): RAGLINE_SHARED_DATA, else the
#: ``shared/data`` folder beside the repository, else /work/shared/data.
SHARED = _shared_data()


def pct(xs: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of ``xs`` (0.0 when there are none)."""
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else 0.0


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (blank lines skipped)."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def eval_index(cache_dir: Path) -> tuple[Path, str]:
    """The index folder and tenant of the ``ragline eval`` index in ``cache_dir``
    (its ``--cache-dir``); the tenant is named as :mod:`ragline.eval.index` names it."""
    manifest_path = next(cache_dir.glob(f"*/{MANIFEST}"))
    key = str(json.loads(manifest_path.read_text())["key"])
    return manifest_path.parent, f"eval-{key[:16]}"


def write_beir(
    out: Path, docs: Sequence[dict[str, Any]], questions: Sequence[dict[str, Any]]
) -> dict[str, int]:
    """A BEIR-layout folder for `ragline eval`: ``docs`` as corpus lines (``_id``,
    ``title``, ``text``, maybe ``format``), each question (``id``, ``question``,
    ``lang``, ``target``) a query judged relevant to its target document."""
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs)
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        for q in questions:
            query = {"_id": q["id"], "text": q["question"], "lang": q["lang"]}
            f.write(json.dumps(query, ensure_ascii=False) + "\n")
    qrels = ["query-id\tcorpus-id\tscore", *(f"{q['id']}\t{q['target']}\t1" for q in questions)]
    (out / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n", encoding="utf-8")
    return {"documents": len(docs), "queries": len(questions)}


def load_module(name: str, path: Path) -> ModuleType:
    """Import the file ``path`` as module ``name`` (a test helper such as
    tests/servers.py, which is no package the scripts could import)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def emit(text: str, out: Path | None, *, append: bool = False) -> None:
    """Print a result and write it to ``out`` when one is given: replacing the file,
    or with ``append`` adding ``text`` and a newline (scripts that add one section a run)."""
    print(text)
    if out is None:
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    if append:
        with out.open("a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    else:
        out.write_text(text, encoding="utf-8")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server the script starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
