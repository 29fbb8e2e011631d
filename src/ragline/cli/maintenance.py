"""`ragline reindex`, `status` and `migrate`: the upkeep of an existing index
(re-embed it, say what it holds, copy it to another store and verify the copy)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from ragline.cli.console import err, fail, out, plain_value, say
from ragline.cli.options import IndexOpt, JsonOpt, existing_engine


def reindex(index: IndexOpt = None) -> None:
    """Re-embed every stored chunk with the configured model (no re-parsing)."""
    from ragline.store.base import StoreError

    rag = existing_engine(index)
    try:
        n = rag.reindex()
    except StoreError as e:
        raise fail(str(e)) from None
    finally:
        rag.close()
    out.print(f"re-embedded {n} chunks with {rag.embedder.fingerprint.name}")


def status(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """What the index holds and which model built it."""
    rag = existing_engine(index)
    try:
        info = rag.status()
    finally:
        rag.close()
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for k, v in info.items():
        say(f"{k}: {plain_value(v)}", hang=2)


def migrate(
    to: Annotated[
        str,
        typer.Option(
            "--to", help="Target store: postgres://…, qdrant://…, qdrant+local://PATH or a folder."
        ),
    ],
    force: Annotated[
        bool, typer.Option("--force", help="Replace what the target already holds.")
    ] = False,
    sample: Annotated[
        int, typer.Option("--sample", help="Chunks whose searches are compared.")
    ] = 20,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the index (STORE_URL, default the embedded one) to another store and verify
    the copy: counts per tenant and a sample of vector and BM25 searches.

    Exit status: 0 when verified, 1 when the copy differs, 2 on a usage or store error.
    """
    from ragline.store.base import StoreError
    from ragline.store.migrate import migrate_to_url

    settings = existing_engine(index).settings
    try:
        report = migrate_to_url(settings, to, force=force, sample=max(0, sample))
    except StoreError as e:
        raise fail(str(e)) from None
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        agreeing = sum(s.agrees for s in report.searches)
        out.print(
            f"migrated {report.documents} documents, {report.chunks} chunks "
            f"from {escape(report.source)} to {escape(report.target)} in {report.seconds:.1f} s; "
            f"{agreeing}/{len(report.searches)} sampled searches agree"
        )
        for problem in report.problems:
            err.print(f"[red]problem:[/] {escape(problem)}")
    if not report.ok:
        raise typer.Exit(1)
