"""`ragline mcp`: the MCP tools over stdio, for an agent that starts ragline itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def mcp_command(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Tenant (default: $RAGLINE_TENANT or 'default').")
    ] = None,
    index: Annotated[
        Path | None,
        typer.Option("--index", help="Index folder (default: $RAGLINE_INDEX_DIR or ./.ragline)."),
    ] = None,
) -> None:
    """Serve the MCP tools (search, ask, get_document, get_chunk) over stdin/stdout.

    The process works in one tenant: the files of the index are the caller's own,
    so no API key is asked for (the HTTP endpoint /mcp of `ragline serve` checks keys).
    """
    from pydantic import ValidationError

    from ragline.engine import Ragline
    from ragline.mcp.server import LocalBackend, build_server
    from ragline.settings import Settings, invalid_setting

    update: dict[str, object] = {}
    if tenant is not None:
        update["tenant"] = tenant
    if index is not None:
        update["index_dir"] = index
    try:
        settings = Settings(**update)
    except ValidationError as e:  # a usage error (exit 2) naming the setting
        typer.echo(f"error: {invalid_setting(e)}", err=True)
        raise typer.Exit(2) from None
    rag = Ragline(settings)
    try:
        _ = rag.embedder  # load the model before the first call, not during it
        build_server(LocalBackend(rag, settings.tenant)).run("stdio")
    finally:
        rag.close()
