"""`ragline search` and `ragline ask`: ranked chunks for a query, and a streamed,
cited answer to a question, printed for a terminal or as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast, get_args

import typer

from ragline.cli.console import WordWrap, err, fail, out, say
from ragline.cli.options import (
    ExpandOpt,
    FilterOpt,
    IndexOpt,
    JsonOpt,
    ModeOpt,
    TenantOpt,
    VerboseOpt,
    WhereOpt,
    existing_engine,
)

if TYPE_CHECKING:
    from ragline.answer.answerer import SearchOptions
    from ragline.types import Answer, Filters, SearchResult


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
        raise fail(f"--mode must be bm25, vector or hybrid, not {mode!r}")
    try:
        parsed: Filters = dict(parse_filter(f) for f in filters or [])
        if where is not None:
            from ragline.filter_input import filters_from_json
            from ragline.settings import Settings

            tree = filters_from_json(where, Settings())
            parsed = {"$and": [tree, parsed]} if parsed and tree else (tree or parsed)
    except ValueError as e:
        raise fail(str(e)) from None
    # a TypedDict is a dict: built as one, so a search does not import the answerer
    options = {"mode": mode, "top_k": top_k, "filters": parsed, "expand": expand}
    return cast("SearchOptions", options)


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
    rag = existing_engine(index, tenant=tenant)
    try:
        result = rag.search(query, **options)
    except (StoreError, ValueError) as e:
        raise fail(str(e)) from None
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
        raise fail(f"--generator must be one of {names}, not {generator!r}")
    history = _read_history(history_file) if history_file else None
    rag = existing_engine(index, tenant=tenant, generator=generator)
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
        raise fail(str(e)) from None
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
        raise fail(
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
        raise fail(f"--history {path}: {e}") from None
    if not isinstance(data, list):
        raise fail(f"--history {path}: expected a JSON list of {{role, content}} messages")
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
