"""How the commands print: the two consoles, text wrapped at spaces to the
terminal (a word, a path or a URL is never cut), a status value as words, and the
one-line error that ends a command."""

from __future__ import annotations

import textwrap
from typing import Any

import typer
from rich.console import Console

out = Console()
err = Console(stderr=True)


class WordWrap:
    """Streamed text (tokens that may cut words) printed wrapped at spaces to
    ``width``: a word is held until it is whole, then goes on this line or the next."""

    def __init__(self, width: int) -> None:
        self.width, self.col, self.word, self.space = max(20, width), 0, "", False

    def feed(self, text: str) -> None:
        for ch in text:
            if ch == "\n":
                self._flush()
                out.print("", markup=False, highlight=False)
                self.col, self.space = 0, False
            elif ch.isspace():
                self._flush()
                self.space = self.col > 0
            else:
                self.word += ch

    def _flush(self) -> None:
        if not self.word:
            return
        gap = 1 if self.space else 0
        if self.col and self.col + gap + len(self.word) > self.width:
            out.print("", markup=False, highlight=False)
            self.col, gap = 0, 0
        out.print(" " * gap + self.word, end="", markup=False, highlight=False, soft_wrap=True)
        self.col += gap + len(self.word)
        self.word, self.space = "", False

    def close(self) -> None:
        self._flush()


def say(text: str, indent: int = 0, hang: int | None = None, style: str = "") -> None:
    """``text`` wrapped at spaces to the console's width, ``indent`` cells in (later
    lines ``hang`` in): a word (a URL, a path) is never cut, a word wider than
    the line stands alone on its own line."""
    rest = indent if hang is None else hang
    lines = textwrap.wrap(
        text,
        width=max(20, out.width),
        initial_indent=" " * indent,
        subsequent_indent=" " * rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    for line in lines or [""]:
        out.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]error:[/] {message}", soft_wrap=True)  # one line, whole paths kept
    return typer.Exit(code)


def plain_value(value: Any) -> str:
    """A status value as words, not a Python literal: a model as its name with
    dimension and digest, a mapping as ``key value`` pairs, a list comma-separated."""
    if isinstance(value, dict):
        if "name" in value and "dimension" in value:
            digest = str(value.get("digest") or "")[:12]
            extra = f", digest {digest}" if digest else ""
            return f"{value['name']} ({value['dimension']} dimensions{extra})"
        if not value:
            return "none"
        return ", ".join(f"{k} {plain_value(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(plain_value(v) for v in value) or "none"
    if value is None:
        return "none"
    return str(value)
