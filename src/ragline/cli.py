"""The `ragline` command line: ingest, search, reindex, status."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import signal
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast, get_args

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from ragline import logs
from ragline.errors import RaglineError
from ragline.eval.cli import eval_command
from ragline.mcp.cli import mcp_command
from ragline.serve.cli import serve as serve_command
from ragline.serve.keys_cli import keys_app

# Only what the commands' signatures need is imported here: `ragline --help` (and
# every command's start) must not load numpy, LanceDB, onnxruntime or pydantic's
# settings. Each command imports the engine and what else it uses itself.
if TYPE_CHECKING:
    from ragline.answer.answerer import SearchOptions
    from ragline.engine import Ragline
    from ragline.ingest.report import IngestReport
    from ragline.ingest.sync import IngestProgress
    from ragline.settings import ChunkerName
    from ragline.types import Answer, Filters, SearchResult


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
            raise _fail(f"{escape(message)} (--debug shows the traceback)") from None

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
out = Console()
err = Console(stderr=True)


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
    # the setting (a .env file included) again in `_engine`.
    logs.configure(os.environ.get("RAGLINE_LOG_FORMAT", "text").strip().lower())


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


def _engine(index: Path | None, **overrides: Any) -> Ragline:
    from pydantic import ValidationError

    from ragline.engine import Ragline
    from ragline.settings import Settings, invalid_setting

    update = {k: v for k, v in overrides.items() if v is not None}
    if index is not None:
        update["index_dir"] = index
    try:
        settings = Settings(**update)
    except ValidationError as e:
        raise _fail(invalid_setting(e)) from None
    logs.configure(settings.log_format)  # a .env file's RAGLINE_LOG_FORMAT too
    return Ragline(settings)


def _existing(index: Path | None, **overrides: Any) -> Ragline:
    """:func:`_engine` for a command that reads an index: exit 2 with one line naming
    where ragline looked and how to make one, instead of creating an empty index
    there and answering as if the documents held nothing."""
    from ragline.store.base import StoreError
    from ragline.store.factory import missing_index

    rag = _engine(index, **overrides)
    try:
        folder = missing_index(rag.settings)
    except StoreError as e:
        raise _fail(str(e)) from None
    if folder is not None:
        where = folder.parent if folder.name == "lance" else folder
        raise _fail(
            f"no index in {where.absolute()}: run `ragline ingest PATH` to make one, "
            "or point --index (RAGLINE_INDEX_DIR) at an existing index"
        )
    return rag


def _with_excludes(index: Path | None, patterns: list[str] | None) -> dict[str, Any]:
    """``--exclude`` added to the configured ``exclude`` patterns (as an override)."""
    if not patterns:
        return {}
    return {"exclude": (*_engine(index).settings.exclude, *patterns)}


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[red]error:[/] {message}", soft_wrap=True)  # one line, whole paths kept
    return typer.Exit(code)


def _search_options(
    mode: str | None,
    filters: list[str] | None,
    top_k: int | None,
    expand: int | None,
    where: str | None = None,
) -> SearchOptions:
    """The retrieval options `search` and `ask` share, checked: a bad one exits with 2."""
    from ragline.engine import parse_filter
    from ragline.retrieve.retriever import SearchMode

    if mode is not None and mode not in get_args(SearchMode):
        raise _fail(f"--mode must be bm25, vector or hybrid, not {mode!r}")
    try:
        parsed: Filters = dict(parse_filter(f) for f in filters or [])
        if where is not None:
            from ragline.filter_input import filters_from_json
            from ragline.settings import Settings

            tree = filters_from_json(where, Settings())
            parsed = {"$and": [tree, parsed]} if parsed and tree else (tree or parsed)
    except ValueError as e:
        raise _fail(str(e)) from None
    # a TypedDict is a dict: built as one, so a search does not import the answerer
    options = {"mode": mode, "top_k": top_k, "filters": parsed, "expand": expand}
    return cast("SearchOptions", options)


@app.command()
def ingest(
    target: Annotated[
        str,
        typer.Argument(
            metavar="PATH", help="A folder (or one file) of documents, or an http(s) URL."
        ),
    ],
    tenant: TenantOpt = None,
    chunker: Annotated[
        str | None, typer.Option("--chunker", help="section (default) or recursive.")
    ] = None,
    max_pages: Annotated[
        int | None,
        typer.Option(
            "--max-pages", min=1, help="URL: pages fetched at most (RAGLINE_WEB_MAX_PAGES)."
        ),
    ] = None,
    max_depth: Annotated[
        int | None,
        typer.Option(
            "--max-depth",
            min=0,
            help="URL: links followed; 0 = that page only (RAGLINE_WEB_MAX_DEPTH).",
        ),
    ] = None,
    exclude: ExcludeOpt = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Index new and changed files, skip unchanged ones, drop deleted ones.

    Paths matching --exclude or the folder's .raglineignore (gitignore syntax)
    are left out, and removed from the index if they were in it.

    A URL is crawled on its site (a sitemap.xml: the pages it lists), honouring
    robots.txt; a re-crawl asks each page "changed?" (ETag / Last-Modified).

    Exit status: 0 when every file indexed, 1 when some failed (the others and
    the existing index are kept), 2 on a usage or store error.
    """
    if chunker not in (None, "section", "recursive"):
        raise _fail(f"--chunker must be 'section' or 'recursive', not {chunker!r}")
    from rich.progress import BarColumn, Progress, TextColumn

    from ragline.ingest.ignore import IgnoreFileError
    from ragline.ingest.lock import IngestLockedError
    from ragline.ingest.web import is_url
    from ragline.store.base import StoreError
    from ragline.tables import fit_tail

    path: str | Path = target if is_url(target) else Path(target)
    # one that exists but cannot be read is a failed file, not a usage error
    if isinstance(path, Path) and not os.path.lexists(path):
        raise _fail(f"{path}: no such file or folder")
    rag = _engine(index, tenant=tenant, **_with_excludes(index, exclude))
    chunker_name: ChunkerName | None = chunker  # type: ignore[assignment]
    stop, restore = _stop_on_ctrl_c()
    try:
        # Counts and times keep their width; the file name gets what is left of
        # the line, cut at its start.
        bar_width = max(4, min(16, err.width - 80))
        with Progress(
            TextColumn("[bold]ingest[/]"),
            BarColumn(bar_width=bar_width),  # chunks embedded of those known so far
            TextColumn("{task.fields[counts]}"),
            TextColumn("{task.fields[file]}", style="dim"),
            console=err,
            transient=True,
            disable=as_json or not err.is_terminal,
        ) as bar:
            task = bar.add_task("ingest", total=None, counts="", file="")

            def progress(event: IngestProgress) -> None:
                counts = progress_line(event)
                room = max(0, err.width - 10 - bar_width - len(counts))
                bar.update(
                    task,
                    completed=event.chunks_embedded,
                    total=event.chunks_to_embed or None,
                    counts=escape(counts),
                    file=escape(fit_tail(event.current, room)) if room >= 8 else "",
                )

            report = rag.ingest(
                path,
                tenant=tenant,
                chunker=chunker_name,
                progress=progress,
                max_pages=max_pages,
                max_depth=max_depth,
                stop=stop,
            )
    except (StoreError, FileNotFoundError, IgnoreFileError, IngestLockedError) as e:
        raise _fail(str(e)) from None
    finally:
        restore()
        rag.close()
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_report(report, rag.reports_dir / "last-ingest.json")
    if report.interrupted:
        err.print(
            f"interrupted: kept {len(report.indexed):,} files ({report.chunks:,} chunks); "
            f"run `ragline ingest {escape(target)}` again to resume",
            highlight=False,
            soft_wrap=True,
        )
        # Everything kept is committed and the report saved; the embedding call
        # abandoned by the stop may still be running in its thread, and a normal exit
        # would wait for it (up to a minute on a loaded machine).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    if report.failed:
        raise typer.Exit(1)


def _stop_on_ctrl_c() -> tuple[threading.Event, Callable[[], None]]:
    """An event the first Ctrl-C sets, so the ingest stops at its next step and keeps
    what is embedded; a second Ctrl-C quits at once (KeyboardInterrupt). Also the
    call that puts the previous handler back."""
    stop = threading.Event()

    def on_sigint(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        err.print(
            "stopping: writing the files already embedded (Ctrl-C again to quit at once)",
            highlight=False,
        )

    if threading.current_thread() is not threading.main_thread():
        return stop, lambda: None  # only the main thread receives signals
    previous = signal.signal(signal.SIGINT, on_sigint)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return stop, restore


def progress_line(event: IngestProgress) -> str:
    """The ingest progress in what costs time: chunks embedded out of those known to
    need it (the total grows until every file is chunked), the embedding rate
    measured so far and the ETA it gives."""
    known = "" if event.files_done >= event.files_total else " known so far"
    line = (
        f"chunks embedded {event.chunks_embedded:,} / {event.chunks_to_embed:,}{known} "
        f"(files chunked {event.files_done:,}/{event.files_total:,})"
    )
    rate, eta = event.rate, event.eta_seconds
    if rate is None or eta is None:
        return f"{line} ETA -"
    left = round(eta)
    return f"{line} {rate:,.1f} chunks/s ETA {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"


def _print_report(r: IngestReport, saved: Path) -> None:
    """The run's counts one per line (a row of ten columns does not fit 80
    columns), then the chapters; every figure printed whole at any width."""
    from ragline.tables import fit_table, pairs_table

    out.print(f"[bold]ingest[/] {escape(r.root)}", highlight=False, soft_wrap=True)
    out.print(f"[dim]tenant {r.tenant}, {r.chunker} chunker, {r.model}[/]", highlight=False)
    if r.model_choice:
        out.print(f"[dim]{escape(r.model_choice)}[/]", highlight=False)
    pairs = [
        ("files found", str(r.files)),
        ("excluded (ignore rules)", str(len(r.excluded))),
        ("indexed (new or changed)", str(len(r.indexed))),
        ("skipped (unchanged)", str(len(r.skipped))),
        ("deleted", str(len(r.deleted))),
        ("failed", f"[red]{len(r.failed)}[/]" if r.failed else "0"),
        ("chunks written", f"{r.chunks:,}"),
        ("  embedded", f"{r.chunks_embedded:,}"),
        ("  vectors reused", f"{r.chunks_reused:,}"),
        ("tokens written", f"{r.tokens:,}"),
        ("chunks in the index", f"{r.index_chunks:,}"),
        ("seconds", f"{r.seconds:.2f}"),
        *((f"  {stage}", f"{s:.2f}") for stage, s in r.stage_seconds.items()),
    ]
    out.print(pairs_table(None, pairs), highlight=False)
    if r.per_chapter:
        rows = [
            [escape(name or "(top level)"), f"{c.files:,}", f"{c.chunks:,}", f"{c.tokens:,}"]
            for name, c in sorted(r.per_chapter.items())
        ]
        table = fit_table("per chapter", ["chapter", "files", "chunks", "tokens"], rows, out.width)
        out.print(table, highlight=False)
    if r.crawl:
        w = r.crawl
        blocked = len(w["blocked_by_robots"])
        cut = "; stopped at the page limit, nothing deleted" if w["truncated"] else ""
        out.print(
            f"web {w['mode']} of {escape(w['scope'])}: {w['fetched']} fetched, "
            f"{w['not_modified']} not modified (304), {w['gone']} gone, "
            f"{blocked} disallowed by robots.txt{cut}",
            highlight=False,
        )
    if r.excluded:
        shown = ", ".join(r.excluded[:10]) + (
            f", … ({len(r.excluded) - 10} more)" if len(r.excluded) > 10 else ""
        )
        out.print(f"[dim]excluded: {escape(shown)}[/]", soft_wrap=True, highlight=False)
    for f in r.failed:
        err.print(f"[red]failed[/] {escape(str(f))}", soft_wrap=True, highlight=False)
    for warning in r.warnings:
        err.print(f"[yellow]warning[/] {escape(str(warning))}", soft_wrap=True, highlight=False)
    out.print(f"[dim]report saved to {escape(str(saved))}[/]", soft_wrap=True, highlight=False)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    mode: ModeOpt = None,
    filters: FilterOpt = None,
    where: WhereOpt = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Hits to return.")] = None,
    expand: ExpandOpt = None,
    tenant: TenantOpt = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Ranked chunks for a query (BM25, vector or fused hybrid)."""
    from ragline.store.base import StoreError

    options = _search_options(mode, filters, top_k, expand, where)
    rag = _existing(index, tenant=tenant)
    try:
        result = rag.search(query, **options)
    except (StoreError, ValueError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    if as_json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_hits(result, verbose)


def _print_hits(result: SearchResult, verbose: bool = False) -> None:
    if not result.hits:
        out.print("[yellow]no results[/]")
    for h in result.hits:
        c = h.chunk
        where = " > ".join([c.title, *[p for p in c.heading_path if p != c.title]])
        extra = f"  (neighbour of {h.expanded_from[:8]})" if h.expanded_from else ""
        lang = c.metadata.get("language")
        extra += f"  language {lang}" if lang else ""
        say(f"{h.rank:>2}. {where}  score {h.score:.4f}{extra}", hang=4, style="bold")
        say(c.url, indent=4, style="dim")
        snippet = " ".join(c.text.split())
        say(f"{snippet[:240]}{'…' if len(snippet) > 240 else ''}", indent=4)
    if verbose:
        timings = ", ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items())
        lang = f"; query language {result.language}" if result.language else ""
        say(f"{result.mode}: {timings}{lang}", style="dim")


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    mode: ModeOpt = None,
    filters: FilterOpt = None,
    where: WhereOpt = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Chunks to retrieve.")] = None,
    expand: ExpandOpt = None,
    generator: Annotated[
        str | None, typer.Option("--generator", help="extractive (default), openai or local.")
    ] = None,
    selected_text: Annotated[
        str | None, typer.Option("--selected-text", help="Text the question is about.")
    ] = None,
    tenant: TenantOpt = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
    history_file: Annotated[
        Path | None,
        typer.Option(
            "--history",
            help="JSON file of the conversation so far: [{role: user|assistant, content}]; "
            "a follow-up is made self-contained from it before searching.",
        ),
    ] = None,
) -> None:
    """Answer a question from the index, citing the passages used.

    Streams the answer, then lists its sources. Exit status: 0 on an answer (or
    the "not enough information" fallback), 1 when generation failed midway
    (the partial answer is shown) or the language model could not be reached or
    refused the request (LLM_BASE_URL; the passages are quoted instead), 2 on a
    usage or store error.
    """
    from ragline.answer.i18n import llm_failure
    from ragline.settings import GeneratorName
    from ragline.store.base import StoreError

    options = _search_options(mode, filters, top_k, expand, where)
    if generator not in (None, *get_args(GeneratorName)):
        names = ", ".join(get_args(GeneratorName))
        raise _fail(f"--generator must be one of {names}, not {generator!r}")
    history = _read_history(history_file) if history_file else None
    rag = _existing(index, tenant=tenant, generator=generator)
    answer: Answer | None = None
    streamed = False
    wrap = WordWrap(out.width)
    try:
        events = rag.ask_stream(question, history=history, selected_text=selected_text, **options)
        for event in events:
            if event.type == "token" and not as_json:
                wrap.feed(event.text)
                streamed = True
            elif event.type == "error" and not as_json:
                wrap.close()
                if streamed:
                    out.print()
                err.print(f"[red]error:[/] {event.error} (the answer above is incomplete)")
            elif event.type == "done":
                answer = event.answer
    except (StoreError, ValueError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    assert answer is not None
    if as_json:
        print(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False))
    else:
        wrap.close()
        out.print()
        _print_answer_details(answer, verbose)
    if not answer.complete:
        raise typer.Exit(1)
    if answer.error and llm_failure(answer.error) in ("unreachable", "refused"):
        # a wrong setting, not a busy model: say which, and do not pass for an answer
        raise _fail(
            f"the language model at LLM_BASE_URL={rag.settings.llm_base_url} could not be "
            f"used ({answer.error}); check LLM_BASE_URL (and LLM_MODEL, LLM_API_KEY). "
            "The answer above quotes the passages instead",
            1,
        )


def _read_history(path: Path) -> list[dict[str, Any]]:
    """The ``--history`` file: a JSON list of messages (checked again by the answerer)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(f"--history {path}: {e}") from None
    if not isinstance(data, list):
        raise _fail(f"--history {path}: expected a JSON list of {{role, content}} messages")
    return data


def _print_answer_details(answer: Answer, verbose: bool = False) -> None:
    if answer.query_rewrite != "none":
        say(f"searched ({answer.query_rewrite}): {answer.search_query}", hang=2, style="dim")
    for phrasing in answer.search_phrasings:
        say(f"also searched (multi-query): {phrasing}", hang=2, style="dim")
    if answer.query_expansion == "failed":
        reason = answer.query_expansion_error
        say(f"multi-query failed, searched the question alone: {reason}", hang=2, style="dim")
    conf = answer.confidence
    colour = {"high": "green", "medium": "yellow"}.get(conf.level, "red")
    out.print(f"[dim]confidence:[/] [{colour}]{conf.level}[/] [dim]({conf.score:.2f})[/]")
    say(conf.reason, indent=2, style="dim")
    if answer.sources:
        # The label wraps at spaces under itself, the path has a line of its own: a
        # path or URL is never cut (copy-paste and grep keep working).
        cited = {c.number for c in answer.citations}
        out.print("[bold]sources[/]")
        for src in answer.sources:
            style = "bold" if src.number in cited else "dim"
            head = f"  [{src.number}] "
            say(f"{head}{src.label}  {src.hit.score:.4f}", hang=len(head), style=style)
            say(src.hit.chunk.source, indent=len(head), style="dim")
    unsupported = [c for c in answer.citations if not c.supported]
    for c in unsupported:
        say(f"unsupported citation [{c.number}] for: {c.claim[:120]}", hang=2, style="yellow")
    if answer.dropped_citations:
        dropped = ", ".join(answer.dropped_citations)
        say(f"removed citations of sources not in the context: {dropped}", hang=2, style="yellow")
    for topic in answer.suggestions:
        say(f"  • {topic}", hang=4)
    if verbose:
        timings = ", ".join(f"{k} {v:.0f} ms" for k, v in answer.timings_ms.items() if "." not in k)
        say(f"{answer.model or answer.generator}: {timings}", style="dim")


@app.command()
def reindex(index: IndexOpt = None) -> None:
    """Re-embed every stored chunk with the configured model (no re-parsing)."""
    from ragline.store.base import StoreError

    rag = _existing(index)
    try:
        n = rag.reindex()
    except StoreError as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    out.print(f"re-embedded {n} chunks with {rag.embedder.fingerprint.name}")


@app.command()
def status(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """What the index holds and which model built it."""
    rag = _existing(index)
    try:
        info = rag.status()
    finally:
        rag.close()
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for k, v in info.items():
        say(f"{k}: {plain_value(v)}", hang=2)


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


@app.command()
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

    settings = _existing(index).settings
    try:
        report = migrate_to_url(settings, to, force=force, sample=max(0, sample))
    except StoreError as e:
        raise _fail(str(e)) from None
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


app.add_typer(keys_app, name="keys")
app.command("serve")(serve_command)
app.command("eval")(eval_command)
app.command("mcp")(mcp_command)


@app.command()
def bench(
    path: Annotated[
        Path | None,
        typer.Argument(help="Folder to ingest (default: the folder the index was built from)."),
    ] = None,
    scale: Annotated[
        str, typer.Option("--scale", help="Synthetic index sizes, e.g. 10k,100k,1m.")
    ] = "10k,100k",
    modes: Annotated[str, typer.Option("--modes", help="Search modes to time.")] = (
        "bm25,vector,hybrid"
    ),
    queries: Annotated[int, typer.Option("--queries", help="Measured queries per mode.")] = 200,
    warmup: Annotated[int, typer.Option("--warmup", help="Unmeasured queries first.")] = 20,
    queries_file: Annotated[
        Path | None,
        typer.Option(
            "--queries-file",
            help="queries.jsonl or one query per line (default: "
            "pseudo-queries cut from the chunks).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the synthetic corpus.")] = 7,
    work_dir: Annotated[
        Path | None, typer.Option("--work-dir", help="Where the temporary indexes go.")
    ] = None,
    report_out: Annotated[
        Path | None, typer.Option("--out", help="Write a Markdown report here.")
    ] = None,
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ingestion throughput, search latency at scale, peak memory and index size."""
    from ragline.eval.bench import (
        BenchConfig,
        BenchReport,
        parse_modes,
        parse_scales,
        rich_tables,
        run_bench,
    )
    from ragline.store.base import StoreError

    command = "ragline " + " ".join(sys.argv[1:])

    if work_dir is not None and not work_dir.is_dir():
        raise _fail(
            f"--work-dir {work_dir}: no such folder (create it, or leave --work-dir out "
            "to use the system's temporary folder)"
        )
    try:
        config = BenchConfig(
            path=path,
            scales=tuple(parse_scales(scale)),
            modes=tuple(parse_modes(modes)),
            queries=queries,
            warmup=warmup,
            queries_file=queries_file,
            seed=seed,
            work_dir=work_dir,
        )
    except ValueError as e:
        raise _fail(str(e)) from None
    rag = _engine(index)
    # A kill still unwinds, so the (possibly GBs of) temporary indexes are removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with err.status("bench", spinner="dots") as spinner:

            def log(msg: str) -> None:  # a spinner on a terminal, else one line per step
                if err.is_terminal:
                    spinner.update(f"bench: {msg}")
                else:
                    err.print(f"bench: {msg}", highlight=False, soft_wrap=True)

            def save(partial: BenchReport) -> None:  # finished scales survive a stopped run
                if report_out is not None:
                    report_out.parent.mkdir(parents=True, exist_ok=True)
                    report_out.write_text(partial.to_markdown(command), "utf-8")

            report = run_bench(rag.settings, config, rag.embedder, log, save)
    except (StoreError, ValueError, FileNotFoundError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    save(report)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return
    for table in rich_tables(report, out.width):
        out.print(table)
    out.print(f"[dim]synthetic chunks: {report.data['how']}[/]")


@app.command()
def watch(
    path: Annotated[Path, typer.Argument(help="The folder to keep indexed.")],
    tenant: TenantOpt = None,
    debounce_ms: Annotated[
        int | None,
        typer.Option(
            "--debounce-ms",
            min=0,
            help="Longest wait gathering events (RAGLINE_WATCH_DEBOUNCE_MS).",
        ),
    ] = None,
    exclude: ExcludeOpt = None,
    index: IndexOpt = None,
) -> None:
    """Index the folder, then re-index it as files are added, changed or deleted.

    --exclude and the folder's .raglineignore leave paths out, as for ingest.

    One status line per re-index (on stderr); Ctrl-C stops.
    """
    from datetime import datetime

    from ragline.ingest.ignore import IgnoreFileError
    from ragline.store.base import StoreError
    from ragline.watch import SyncEvent, watch_folder

    if not path.is_dir():
        raise _fail(f"{path}: no such folder")
    rag = _engine(index, tenant=tenant, **_with_excludes(index, exclude))

    def show(event: SyncEvent) -> None:
        at = datetime.now().strftime("%H:%M:%S")
        if event.report is None:
            line = f"[red]{at} re-index failed:[/] {escape(event.error)}"
        else:
            r = event.report
            failed = f", [red]{len(r.failed)} failed[/]" if r.failed else ""
            line = (
                f"{at} {event.changes}: {len(r.indexed)} indexed, {len(r.deleted)} deleted, "
                f"{r.chunks_embedded} chunks embedded{failed}; {r.files} files, "
                f"{r.index_chunks} chunks in {event.seconds:.2f} s; watching {escape(str(path))}"
            )
            for f in r.failed:
                err.print(f"[red]failed[/] {escape(str(f))}")
        err.print(line, highlight=False, soft_wrap=True)

    try:
        watch_folder(rag, path, tenant=tenant, on_sync=show, debounce_ms=debounce_ms)
    except KeyboardInterrupt:  # Ctrl-C between two waits: a sync is atomic per batch
        pass
    except (StoreError, FileNotFoundError, IgnoreFileError) as e:
        raise _fail(str(e)) from None
    finally:
        rag.close()
    err.print(f"stopped watching {escape(str(path))}", highlight=False)


def main() -> None:  # pragma: no cover - console entry for `python -m ragline`
    sys.exit(app())


@app.command()
def stats(
    index: IndexOpt = None,
    tenant: TenantOpt = None,
    limit: Annotated[int, typer.Option("--limit", help="Newest rows to read.")] = 10_000,
    as_json: JsonOpt = False,
) -> None:
    """Latency percentiles per stage (first token included), statuses and tokens, and
    the answers' feedback per day (helpful rate, citation click rate), from the query
    log of `ragline serve`."""
    from ragline.serve.querylog import QueryLogError, make_query_log, sqlite_path
    from ragline.serve.stats import summarize
    from ragline.tables import fit_table

    settings = _engine(index, tenant=tenant).settings
    db = sqlite_path(settings) if settings.query_log_enabled else None
    if db is not None and not db.is_file():  # never create one (nor its folder) to read it
        raise _fail(
            f"no query log at {db.absolute()}: `ragline serve` writes one as it answers; "
            "point --index (RAGLINE_INDEX_DIR) or RAGLINE_QUERY_LOG_URL at the server's"
        )
    try:
        log = make_query_log(settings)
        try:
            rows = log.rows(settings.tenant, limit=limit)
            since = min((r.created_at for r in rows), default="")
            feedback = log.feedback(settings.tenant, since) if rows else []
        finally:
            log.close()
    except (QueryLogError, ValueError) as e:
        raise _fail(str(e)) from None
    summary = summarize(rows, feedback)
    if as_json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        return
    say(
        f"{summary['requests']} requests ({summary['first']} … {summary['last']}); "
        f"status {plain_value(summary['by_status'])}; "
        f"fallback rate {summary['fallback_rate']:.1%}; {summary['total_tokens']:,} tokens",
        hang=2,
    )
    rows_ms = {"response": summary["response_time_ms"], **summary["stages_ms"]}
    table_rows = [
        [escape(stage), *(f"{q[p]:.1f}" for p in ("p50", "p95", "p99"))]
        for stage, q in rows_ms.items()
        if q
    ]
    headers = ["stage", "p50", "p95", "p99"]
    out.print(fit_table("latency per stage (ms)", headers, table_rows, out.width), highlight=False)
    days = summary["feedback"]["by_day"]
    if days:

        def rate(value: float | None) -> str:
            return "–" if value is None else f"{value:.1%}"

        headers = ["day", "answers", "rated", "helpful", "cited", "clicked"]
        feedback_rows = [
            [
                d["day"],
                str(d["answers"]),
                str(d["rated"]),
                rate(d["helpful_rate"]),
                str(d["with_citations"]),
                rate(d["citation_click_rate"]),
            ]
            for d in days
        ]
        title = "feedback per day (helpful: rated up; clicked: answers with a citation opened)"
        out.print(fit_table(title, headers, feedback_rows, out.width), highlight=False)


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
