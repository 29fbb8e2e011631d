"""ragline: grounded, cited answers over a folder of documents.

Public API: :class:`Ragline` (ingest, search, reindex, status) and
:class:`Settings` (every option, read from the environment). Imported lazily so
that ``import ragline.types`` does not load the model runtime and the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragline.engine import Ragline
    from ragline.settings import Settings

__all__ = ["Ragline", "Settings"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "Ragline":
        from ragline.engine import Ragline

        return Ragline
    if name == "Settings":
        from ragline.settings import Settings

        return Settings
    raise AttributeError(f"module 'ragline' has no attribute {name!r}")
