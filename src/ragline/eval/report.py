"""Render evaluation results: a rich table for the terminal, Markdown for a report file."""

from __future__ import annotations

import platform
from datetime import UTC, datetime

from rich.console import RenderableType

from ragline.eval.answers import AnswersReport
from ragline.eval.runs import METRIC_NAMES, RetrievalReport
from ragline.tables import fit_table

LATENCY_KEYS = ("p50", "p95", "p99")
#: Per-language rows: recall@3 is hit@3 when each query has one relevant document.
LANGUAGE_METRICS = ("ndcg@10", "recall@3", "recall@10", "mrr@10")


def language_rows(report: RetrievalReport) -> list[list[str]]:
    """(mode, language, queries, metrics…) for each mode scored per language."""
    return [
        [r.mode, lang, str(int(m["queries"])), *(f"{m[k]:.4f}" for k in LANGUAGE_METRICS)]
        for r in report.results
        for lang, m in r.languages.items()
    ]


def language_table(report: RetrievalReport, width: int) -> RenderableType | None:
    """The per-language scores, or None when the queries carry fewer than two languages."""
    rows = language_rows(report)
    if not rows:
        return None
    headers = ["mode", "language", "queries", *LANGUAGE_METRICS]
    return fit_table("per language", headers, rows, width)


def retrieval_table(report: RetrievalReport, width: int) -> RenderableType:
    """One row per mode (turned or stacked when ``width`` is too narrow for it)."""
    title = (
        f"{report.dataset} ({report.split}): {report.queries} queries, "
        f"{report.documents} documents, {report.chunks} chunks, {report.model}"
    )
    headers = ["mode", *METRIC_NAMES, *(f"{key} ms" for key in LATENCY_KEYS)]
    best = {
        name: max((r.metrics[name] for r in report.results), default=0.0) for name in METRIC_NAMES
    }
    rows = []
    for r in report.results:
        label = f"{r.mode} (default)" if r.mode == report.default_mode else r.mode
        cells = [label]
        for name in METRIC_NAMES:
            v = r.metrics[name]
            cells.append(f"[bold]{v:.4f}[/]" if v == best[name] else f"{v:.4f}")
        cells += [f"{r.latency_ms[k]:.1f}" for k in LATENCY_KEYS]
        rows.append(cells)
    return fit_table(title, headers, rows, width)


def answers_table(report: AnswersReport, width: int) -> RenderableType:
    """One row per generator (turned or stacked when ``width`` is too narrow for it)."""
    title = f"answers: {report.claims} claims from {report.claims_dir} ({report.split})"
    headers = [
        "generator",
        "claims scored",
        "citations",
        "doc P",
        "doc R",
        "sentence P",
        "sentence R",
        "fallback out-of-scope",
        "fallback in-scope",
        "abstention distractor",
        "wrong-doc citations flagged",
        "p50 ms",
    ]
    rows = []
    for r in report.results:
        s = r.scores
        rows.append(
            [
                r.generator,
                str(s.claims),
                str(s.citations),
                f"{s.doc_precision:.3f}",
                f"{s.doc_recall:.3f}",
                f"{s.sentence_precision:.3f}",
                f"{s.sentence_recall:.3f}",
                f"{r.fallback_out_of_scope:.3f} of {r.out_of_scope}",
                f"{r.fallback_in_scope:.3f}",
                f"{r.abstention_distractor:.3f} of {r.distractor_claims}",
                f"{s.flagged_without_evidence:.3f} of {s.citations_without_evidence}",
                f"{r.latency_ms['p50']:.0f}",
            ]
        )
    return fit_table(title, headers, rows, width)


def _machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def _heading(title: str, command: str, seconds: float) -> list[str]:
    """A report's title and the line saying which command made it, when and where."""
    return [
        f"# {title}",
        "",
        f"Produced by `{command}` on {datetime.now(UTC).strftime('%Y-%m-%d')} "
        f"({_machine()}; {seconds:.0f} s in all).",
        "",
    ]


def retrieval_markdown(report: RetrievalReport, command: str) -> str:
    lines = [
        *_heading(
            f"Retrieval evaluation: {report.dataset} ({report.split})", command, report.seconds
        ),
        f"Data: {report.queries} judged queries, {report.documents} documents indexed as "
        f"{report.chunks} chunks with {report.model}. Document scores: each document "
        f"takes the place of its best chunk; metrics from ir-measures at top-{report.top_k}. "
        "Latency: wall time of one search call per query, query embedding included.",
        "",
        "| mode | " + " | ".join(METRIC_NAMES) + " | p50 ms | p95 ms | p99 ms |",
        "|---|" + "---:|" * (len(METRIC_NAMES) + 3),
    ]
    for r in report.results:
        label = f"**{r.mode}** (default)" if r.mode == report.default_mode else r.mode
        cells = [f"{r.metrics[n]:.4f}" for n in METRIC_NAMES]
        cells += [f"{r.latency_ms[k]:.1f}" for k in LATENCY_KEYS]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    rows = language_rows(report)
    if rows:
        lines += [
            "",
            "Per language (the queries' `lang` tags; recall@3 is hit@3 for a query with "
            "one relevant document):",
            "",
            "| mode | language | queries | " + " | ".join(LANGUAGE_METRICS) + " |",
            "|---|---|---:|" + "---:|" * len(LANGUAGE_METRICS),
            *("| " + " | ".join(row) + " |" for row in rows),
        ]
    settings = ", ".join(f"`{k}={v}`" for k, v in report.settings.items())
    reused = "reused" if report.index.get("reused") else "built"
    lines += [
        "",
        f"Settings: {settings}.",
        "",
        f"Index: {reused} in {report.index.get('seconds', 0):.0f} s "
        f"(key `{str(report.index.get('key', ''))[:16]}`).",
    ]
    return "\n".join(lines) + "\n"


def answers_markdown(report: AnswersReport, command: str) -> str:
    lines = [
        *_heading(
            f"Answer evaluation: {report.claims_dir} ({report.split})", command, report.seconds
        ),
        "Citation precision / recall, micro-averaged over the claims with gold evidence; "
        "document level (the cited abstract holds evidence) and sentence level (the "
        "citation's supporting span covers an evidence sentence). Fallback rates: share "
        "of out-of-scope questions that got the fallback answer (should be 1), and of "
        "claims with evidence that did (should be 0). Distractor: the claims with evidence "
        "asked again with their evidence documents removed from the results; abstention = "
        "share that got the fallback (should be 1). Wrong-doc citations flagged: share of "
        "the citations of a document without evidence marked unsupported.",
        "",
        "| generator | claims scored | citations | doc P | doc R | sentence P | sentence R "
        "| fallback out-of-scope | fallback in-scope | abstention distractor "
        "| wrong-doc citations flagged | p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report.results:
        s = r.scores
        lines.append(
            f"| {r.generator} | {s.claims} | {s.citations} | {s.doc_precision:.3f} "
            f"| {s.doc_recall:.3f} | {s.sentence_precision:.3f} | {s.sentence_recall:.3f} "
            f"| {r.fallback_out_of_scope:.3f} ({r.out_of_scope}) | {r.fallback_in_scope:.3f} "
            f"| {r.abstention_distractor:.3f} ({r.distractor_claims}) "
            f"| {s.flagged_without_evidence:.3f} ({s.citations_without_evidence}) "
            f"| {r.latency_ms['p50']:.0f} |"
        )
    for r in report.results:
        if r.distractor_claims:
            lines += [
                "",
                f"{r.generator}: the confidence score separates claims with their evidence "
                f"from the same claims without it at AUC {r.answerability_auc:.3f}; a bar "
                f"on it that lets ≤ 5 % of the answerable claims fall back abstains on "
                f"{r.abstention_at_5pct:.3f} of the distractor runs.",
            ]
    settings = ", ".join(f"`{k}={v}`" for k, v in report.settings.items())
    lines += ["", f"Settings: {settings}."]
    return "\n".join(lines) + "\n"
