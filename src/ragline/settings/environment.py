"""Where settings come from: the process environment and a `.env` file.

pydantic-settings did this until its import proved to be ≈ 0.3 CPU-s of every
command (it loads asyncio, ssl, pydantic.dataclasses and its cloud secret
sources; issue 26's cold `ragline search` budget is 1.5 CPU-s), and ragline needs
only one rule set, kept here as one pure function:

* a field is read from ``RAGLINE_<FIELD>``, or, where it declares
  ``validation_alias=AliasChoices(...)``, from the first of those names that is
  set (the specification's bare names, ``RRF_K`` …); names match in any case;
* the environment wins over the `.env` file whatever name each uses (an exported
  ``RAGLINE_LLM_API_KEY`` beats the file's ``LLM_API_KEY``), and a value the
  caller passes wins over both;
* a tuple, list, set or dict field takes a JSON value (``["a", "b"]``); a value
  that is not JSON is handed on as text, so pydantic's error names the setting.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import AliasChoices
from pydantic.fields import FieldInfo

PREFIX = "RAGLINE_"

_COMPLEX = (tuple, list, set, frozenset, dict)


def env_names(name: str, field: FieldInfo) -> tuple[str, ...]:
    """The variable names ``field`` is read from, in the order they are tried."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(c for c in alias.choices if isinstance(c, str))
    if alias is not None:  # a plain alias or a path: no setting declares one
        raise TypeError(f"setting {name}: only AliasChoices aliases are read from the environment")
    return (f"{PREFIX}{name}".upper(),)


def _is_complex(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_complex(a) for a in typing.get_args(annotation) if a is not type(None))
    return (origin or annotation) in _COMPLEX


def _decoded(raw: str, field: FieldInfo) -> Any:
    if not _is_complex(field.annotation):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # pydantic rejects it with the setting's name


def _given(name: str, field: FieldInfo, passed: Iterable[str]) -> bool:
    """Whether the caller passed ``field`` under a name pydantic reads: the field's
    own, or one of its aliases (``RAGLINE_<FIELD>`` alone is not one)."""
    keys = {name, *env_names(name, field)} if field.validation_alias else {name}
    return any(k in keys for k in passed)


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables of a `.env` file (python-dotenv's syntax: quotes, ``export``,
    comments); an absent file is empty."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values  # only where a .env file exists

    return {k: v for k, v in dotenv_values(path, encoding="utf-8").items() if v is not None}


def environment_values(
    fields: Mapping[str, FieldInfo],
    environ: Mapping[str, str],
    dotenv: Mapping[str, str],
    passed: Iterable[str] = (),
) -> dict[str, Any]:
    """The input a settings model gets from ``environ`` over ``dotenv``, keyed so
    that pydantic reads it (the field name, or the alias that was set), leaving out
    the fields named in ``passed`` (the caller's own values win)."""
    sources = [{k.lower(): v for k, v in src.items()} for src in (environ, dotenv)]
    passed = set(passed)
    data: dict[str, Any] = {}
    for name, field in fields.items():
        if _given(name, field, passed):
            continue
        names = env_names(name, field)
        hit = next(((env, src) for src in sources for env in names if env.lower() in src), None)
        if hit is not None:
            env, src = hit
            key = env if field.validation_alias is not None else name
            data[key] = _decoded(src[env.lower()], field)
    return data
