"""`ragline keys create|list|revoke`: manage the API keys of `ragline serve`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # imported when a command runs: `ragline --help` stays light
    from ragline.serve.auth import KeyStore

keys_app = typer.Typer(
    help="API keys of the HTTP service (used when RAGLINE_API_KEYS_ENABLED=true).",
    no_args_is_help=True,
)
_out = Console()
_err = Console(stderr=True)

IndexOpt = Annotated[
    Path | None,
    typer.Option("--index", help="Index folder (default: $RAGLINE_INDEX_DIR or ./.ragline)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _store(index: Path | None) -> KeyStore:
    from pydantic import ValidationError

    from ragline.serve.auth import KeyStore
    from ragline.settings import Settings, invalid_setting

    try:
        settings = Settings(index_dir=index) if index is not None else Settings()
        return KeyStore(settings)
    except ValidationError as e:
        raise _fail(invalid_setting(e)) from None
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from None


def _fail(message: str, code: int = 2) -> typer.Exit:
    _err.print(f"[red]error:[/] {message}")
    return typer.Exit(code)


@keys_app.command()
def create(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant the key acts for.")],
    name: Annotated[str, typer.Option("--name", help="A label (who or what uses it).")] = "",
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a key and print it once: only its hash is stored."""
    store = _store(index)
    try:
        key_id, key = store.create(tenant, name)
    except ValueError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()
    if as_json:
        print(json.dumps({"key_id": key_id, "tenant": tenant, "name": name, "key": key}))
        return
    print(key)
    _err.print(
        f"key {key_id} for tenant {tenant!r} created. Store it now: it cannot be shown again."
    )


@keys_app.command("list")
def list_keys(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys.")] = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List keys (ids, tenants, names, dates; never the keys themselves)."""
    store = _store(index)
    try:
        keys = store.list(tenant)
    finally:
        store.close()
    if as_json:
        print(json.dumps([{**asdict(k), "active": k.active} for k in keys], indent=2))
        return
    if not keys:
        _out.print("no API keys")
        return
    rows = [
        [
            escape(k.key_id),
            escape(k.tenant),
            escape(k.name),
            k.created_at,
            "active" if k.active else f"revoked {k.revoked_at}",
        ]
        for k in keys
    ]
    headers = ["key id", "tenant", "name", "created", "status"]
    from ragline.tables import fit_table

    _out.print(fit_table(None, headers, rows, _out.width), highlight=False)


@keys_app.command()
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key id shown by `ragline keys list`.")],
    index: IndexOpt = None,
) -> None:
    """Revoke a key at once (a running server refuses it on the next request).

    Exit status 1 when no active key has this id.
    """
    store = _store(index)
    try:
        done = store.revoke(key_id)
    finally:
        store.close()
    if not done:
        raise _fail(f"no active key with id {key_id!r}", code=1)
    _out.print(f"revoked {key_id}")
