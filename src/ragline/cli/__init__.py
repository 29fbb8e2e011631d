"""The `ragline` command line: the app, its error handling and help, and the
commands registered in the order `ragline --help` lists them.

Each command lives with the others of its job: :mod:`.indexing` (ingest, watch),
:mod:`.query` (search, ask), :mod:`.maintenance` (reindex, status, migrate),
:mod:`.performance` (bench, stats); `serve`, `keys`, `eval` and `mcp` come from
their own packages. The console script is ``ragline.cli:main``.
"""

from __future__ import annotations

import gc
import inspect
import os
import shutil
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from ragline import logs
from ragline.cli import indexing, maintenance, performance, query
from ragline.cli.console import fail
from ragline.errors import RaglineError
from ragline.eval.cli import eval_command
from ragline.mcp.cli import mcp_command
from ragline.serve.cli import serve as serve_command
from ragline.serve.keys_cli import keys_app

# Only what the commands' signatures need is imported here and by the command
# modules: `ragline --help` (and every command's start) must not load numpy,
# LanceDB, onnxruntime or pydantic's settings. Each command imports the engine and
# what else it uses itself.


class _OneLineErrors(TyperGroup):
    """Runs a command so that ragline's own errors (and a bad setting) end it with
    one line naming what to fix, exit status 2; the traceback only with --debug
    (RAGLINE_DEBUG=1), so the useful line is not the 75th."""

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except Exception as e:
            # a bad setting raised pydantic's error, so pydantic is loaded by then;
            # --help and typer.Exit need not import it to be told apart
            pydantic = sys.modules.get("pydantic")
            invalid = pydantic is not None and isinstance(e, pydantic.ValidationError)
            if not (invalid or isinstance(e, RaglineError)) or ctx.params.get("debug"):
                raise
            from ragline.settings import invalid_setting

            message = invalid_setting(e) if invalid else str(e)  # type: ignore[arg-type]
            raise fail(f"{escape(message)} (--debug shows the traceback)") from None

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        """Help wraps at the terminal's width (``COLUMNS`` first), at most 78 columns
        as click's own; set on the context so that it also holds where click forces
        80 (its test runner), and every command's context inherits it."""
        extra.setdefault("terminal_width", max(min(shutil.get_terminal_size().columns, 80) - 2, 40))
        return super().make_context(info_name, args, parent, **extra)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list with each command's first sentence whole, wrapped to the
        terminal: click's plain help cuts it to one line and ends it with "..."."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, first_sentence(cmd.help or cmd.short_help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def first_sentence(text: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


app = typer.Typer(
    cls=_OneLineErrors,
    help="ragline: grounded, cited answers over a folder of documents.",
    no_args_is_help=True,
    add_completion=False,
    # click's plain help: typer's rich panels import rich.markdown and markdown-it,
    # a third of a CPU-second more for every `--help`
    rich_markup_mode=None,
)


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar="RAGLINE_DEBUG",
            help="Show the traceback of an error, not just its one line.",
        ),
    ] = False,
) -> None:
    """ragline: grounded, cited answers over a folder of documents."""
    # RAGLINE_LOG_FORMAT from the environment, not through Settings: building those
    # here would load pydantic for every `--help`. Commands that build Settings apply
    # the setting (a .env file included) again in `new_engine`.
    logs.configure(os.environ.get("RAGLINE_LOG_FORMAT", "text").strip().lower())


# The order of registration is the order of `ragline --help`.
app.command()(indexing.ingest)
app.command()(query.search)
app.command()(query.ask)
app.command()(maintenance.reindex)
app.command()(maintenance.status)
app.command()(maintenance.migrate)
app.add_typer(keys_app, name="keys")
app.command("serve")(serve_command)
app.command("eval")(eval_command)
app.command("mcp")(mcp_command)
app.command()(performance.bench)
app.command()(indexing.watch)
app.command()(performance.stats)


#: Allocations between two young-generation collections in a `ragline` process.
YOUNG_GC_THRESHOLD = 2000


def main() -> None:
    """The `ragline` command: the console script and ``python -m ragline``.

    What a command leaves alive is frozen out of the cycle collector before the
    interpreter exits: its shutdown collections otherwise walk every loaded module's
    objects again, ≈ 0.2 of the 1.8 CPU-s of a cold `ragline search` (perf,
    benchmarks/results/startup.md). The operating system takes the memory back all the
    same; files and stores are closed by the commands themselves, never by a
    finaliser at exit (a ``__del__`` of an object caught in a reference cycle at exit,
    ragline has none, is skipped; atexit callbacks still run). In-process callers
    (tests, CliRunner) call ``app``.

    The young generation is collected every 2,000 allocations rather than 700 (the
    default of Python 3.13 on): a cold search's imports spent ≈ 0.09 CPU-s in 131
    collections, ≈ 0.05 in 46 (gc.callbacks, 3 runs each)."""
    threshold = gc.get_threshold()
    if threshold[0] < YOUNG_GC_THRESHOLD:
        gc.set_threshold(YOUNG_GC_THRESHOLD, *threshold[1:])
    try:
        app()
    finally:
        gc.freeze()


def flowed(doc: str) -> str:
    """A docstring with each paragraph on one line: typer lists a command by its
    docstring's first lines as written, so a hard line break in the source broke
    the list mid-sentence; flowed, rich wraps it to the terminal."""
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n")]
    return "\n\n".join(p for p in paragraphs if p)


def _flow_help(typer_app: typer.Typer) -> None:
    for info in typer_app.registered_commands:
        doc = info.help or inspect.getdoc(info.callback) or ""
        if doc:
            info.help = flowed(doc)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _flow_help(group.typer_instance)


_flow_help(app)
