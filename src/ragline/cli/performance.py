"""`ragline bench` and `ragline stats`: how ragline performs, measured on
synthetic indexes of growing size, or read from the query log of `ragline serve`."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from ragline.cli.console import err, fail, out, plain_value, say
from ragline.cli.options import IndexOpt, JsonOpt, TenantOpt, new_engine


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
        raise fail(
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
        raise fail(str(e)) from None
    rag = new_engine(index)
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
        raise fail(str(e)) from None
    finally:
        rag.close()
    save(report)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return
    for table in rich_tables(report, out.width):
        out.print(table)
    out.print(f"[dim]synthetic chunks: {report.data['how']}[/]")


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

    settings = new_engine(index, tenant=tenant).settings
    db = sqlite_path(settings) if settings.query_log_enabled else None
    if db is not None and not db.is_file():  # never create one (nor its folder) to read it
        raise fail(
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
        raise fail(str(e)) from None
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
