"""Where the index lives: its folder, the tenant, the store it is kept in."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ragline.settings.common import Section, _env


class StoreSettings(Section):
    """Where ragline works: every command's index folder, tenant and store."""

    # --- where -----------------------------------------------------------------
    index_dir: Path = Field(Path(".ragline"), description="Folder of the embedded index.")
    tenant: str = Field(
        "default",
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.\-]+$",
        description="Tenant every command works in (documents, searches, answers).",
    )

    # --- stores: where the index lives (see docs/scale.md) -----------------------------
    store_url: str = Field(
        "",
        validation_alias=_env("STORE_URL"),
        description="Store of the index: empty = LanceDB in index_dir; a folder, lance://, "
        "postgres://, qdrant:// or qdrant+local:// (ragline.store.url).",
    )
