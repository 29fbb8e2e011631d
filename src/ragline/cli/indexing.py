"""`ragline ingest` and `ragline watch`: documents into the index, once with a
progress bar and a report, or kept in step with a folder as it changes."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ragline.cli.console import err, fail, out
from ragline.cli.options import ExcludeOpt, IndexOpt, JsonOpt, TenantOpt, new_engine

if TYPE_CHECKING:
    from ragline.ingest.progress import IngestProgress
    from ragline.ingest.report import IngestReport
    from ragline.settings import ChunkerName


def _with_excludes(index: Path | None, patterns: list[str] | None) -> dict[str, Any]:
    """``--exclude`` added to the configured ``exclude`` patterns (as an override)."""
    if not patterns:
        return {}
    return {"exclude": (*new_engine(index).settings.exclude, *patterns)}


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
        raise fail(f"--chunker must be 'section' or 'recursive', not {chunker!r}")
    from rich.progress import BarColumn, Progress, TextColumn

    from ragline.ingest.ignore import IgnoreFileError
    from ragline.ingest.lock import IngestLockedError
    from ragline.ingest.web import is_url
    from ragline.store.base import StoreError
    from ragline.tables import fit_tail

    path: str | Path = target if is_url(target) else Path(target)
    # one that exists but cannot be read is a failed file, not a usage error
    if isinstance(path, Path) and not os.path.lexists(path):
        raise fail(f"{path}: no such file or folder")
    rag = new_engine(index, tenant=tenant, **_with_excludes(index, exclude))
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
        raise fail(str(e)) from None
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
        raise fail(f"{path}: no such folder")
    rag = new_engine(index, tenant=tenant, **_with_excludes(index, exclude))

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
        raise fail(str(e)) from None
    finally:
        rag.close()
    err.print(f"stopped watching {escape(str(path))}", highlight=False)
