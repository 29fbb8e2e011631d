"""Adapters that put ragline's search where Python RAG code already is.

:mod:`ragline.integrations.langchain` and :mod:`ragline.integrations.llamaindex` each
wrap :meth:`Ragline.search <ragline.engine.Ragline.search>` as that framework's
retriever (extras ``ragline[langchain]`` and ``ragline[llamaindex]``). Both describe a
hit the same way, with :func:`hit_metadata`, so a chain or query engine sees the
metadata and scores ragline's own HTTP API returns.
"""

from __future__ import annotations

from typing import Any, cast

from ragline.answer.answerer import SearchOptions
from ragline.types import Hit

#: The per-call options a retriever passes to ``Ragline.search`` (its SearchOptions).
SEARCH_OPTIONS = frozenset(SearchOptions.__annotations__)


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit as ragline's API shows it (ids, scores, title, section, url, page, …),
    less the text, which the framework's document carries itself."""
    return {key: value for key, value in hit.to_dict().items() if key != "text"}


def search_options(defaults: SearchOptions, overrides: dict[str, Any]) -> SearchOptions:
    """``defaults`` with the per-call ``overrides`` on top; an unknown name is a
    TypeError naming it (a typo would otherwise be dropped silently)."""
    unknown = sorted(set(overrides) - SEARCH_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown search option(s) {', '.join(unknown)}: "
            f"expected {', '.join(sorted(SEARCH_OPTIONS))}"
        )
    merged: dict[str, Any] = {k: v for k, v in defaults.items() if v is not None}
    merged.update({k: v for k, v in overrides.items() if v is not None})
    return cast(SearchOptions, merged)
