"""The options the commands share (index, tenant, filters, output) and the engine
they open: a bad setting ends the command with one line, and a command that reads
an index exits when there is none."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragline import logs
from ragline.cli.console import fail

if TYPE_CHECKING:
    from ragline.engine import Ragline


IndexOpt = Annotated[
    Path | None,
    typer.Option("--index", help="Index folder (default: $RAGLINE_INDEX_DIR or ./.ragline)."),
]
TenantOpt = Annotated[
    str | None, typer.Option("--tenant", help="Tenant (default: $RAGLINE_TENANT or 'default').")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ModeOpt = Annotated[str | None, typer.Option("--mode", help="bm25, vector or hybrid (default).")]
FilterOpt = Annotated[
    list[str] | None,
    typer.Option("--filter", help="key=value on chunk metadata; repeatable."),
]
WhereOpt = Annotated[
    str | None,
    typer.Option(
        "--where",
        help='A JSON metadata filter, e.g. \'{"date": {"$gte": "2024-01-01"}}\' '
        "(operators and $and/$or/$not, see docs/search.md); ANDed with --filter.",
    ),
]
ExcludeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        metavar="GLOB",
        help="Leave out matching paths (gitignore syntax, relative to PATH; repeatable); "
        "PATH/.raglineignore is read too.",
    ),
]
ExpandOpt = Annotated[
    int | None, typer.Option("--expand", help="Neighbour chunks to add around each hit.")
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Also print the time each stage took.")
]


def new_engine(index: Path | None, **overrides: Any) -> Ragline:
    from pydantic import ValidationError

    from ragline.engine import Ragline
    from ragline.settings import Settings, invalid_setting

    update = {k: v for k, v in overrides.items() if v is not None}
    if index is not None:
        update["index_dir"] = index
    try:
        settings = Settings(**update)
    except ValidationError as e:
        raise fail(invalid_setting(e)) from None
    logs.configure(settings.log_format)  # a .env file's RAGLINE_LOG_FORMAT too
    return Ragline(settings)


def existing_engine(index: Path | None, **overrides: Any) -> Ragline:
    """:func:`new_engine` for a command that reads an index: exit 2 with one line naming
    where ragline looked and how to make one, instead of creating an empty index
    there and answering as if the documents held nothing."""
    from ragline.store.base import StoreError
    from ragline.store.factory import missing_index

    rag = new_engine(index, **overrides)
    try:
        folder = missing_index(rag.settings)
    except StoreError as e:
        raise fail(str(e)) from None
    if folder is not None:
        where = folder.parent if folder.name == "lance" else folder
        raise fail(
            f"no index in {where.absolute()}: run `ragline ingest PATH` to make one, "
            "or point --index (RAGLINE_INDEX_DIR) at an existing index"
        )
    return rag
