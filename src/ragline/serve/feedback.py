"""Answer feedback: thumbs up/down (with an optional comment) and citation clicks.

Specification 002 measures answers by "% of answers rated helpful" and citations by
"% of users clicking citations"; this module holds the feedback record, the table it
is kept in (next to the query log, in the same database, scoped to the tenant) and
the per-day summary ``ragline stats`` prints. A rating refers to a query id the
query log holds for the same tenant, so feedback cannot be attached to another
tenant's answer. In privacy mode no comment text is stored (the store drops it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal

Kind = Literal["rating", "click"]
Rating = Literal["up", "down"]

#: Columns of the feedback table, in insert order.
FEEDBACK_COLUMNS = (
    "query_id",
    "tenant",
    "created_at",
    "kind",
    "rating",
    "comment",
    "citation",
    "ip_hash",
)


def feedback_ddl(table: str, *, id_column: str, time_type: str) -> tuple[str, ...]:
    """The feedback table and its index, in either log's SQL: one column list, so the
    SQLite and PostgreSQL tables cannot drift apart; the dialects differ only in the
    id column and the timestamp type."""
    return (
        f"""CREATE TABLE {table} (
        id {id_column},
        query_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        created_at {time_type} NOT NULL,
        kind TEXT NOT NULL,
        rating TEXT,
        comment TEXT,
        citation INTEGER,
        ip_hash TEXT NOT NULL
    )""",
        f"CREATE INDEX {table}_tenant_query ON {table} (tenant, query_id)",
    )


SQLITE_FEEDBACK_DDL = feedback_ddl(
    "query_feedback", id_column="INTEGER PRIMARY KEY AUTOINCREMENT", time_type="TEXT"
)


def postgres_feedback_ddl(table: str) -> tuple[str, ...]:
    return feedback_ddl(table, id_column="BIGSERIAL PRIMARY KEY", time_type="TIMESTAMPTZ")


@dataclass(frozen=True, slots=True)
class FeedbackRow:
    """One piece of feedback on one answer: a rating (``rating`` up or down, an
    optional ``comment``) or a click on citation ``[citation]``."""

    query_id: str
    tenant: str
    created_at: str  # ISO 8601 UTC, as the query log's
    kind: Kind
    ip_hash: str
    rating: Rating | None = None
    comment: str | None = None
    citation: int | None = None

    def record(self, *, privacy: bool = False) -> tuple[Any, ...]:
        """SQL parameters in :data:`FEEDBACK_COLUMNS` order; ``privacy`` drops the
        comment whatever the row holds (the store enforces QUERY_LOG_PRIVACY)."""
        return (
            self.query_id,
            self.tenant,
            self.created_at,
            self.kind,
            self.rating,
            None if privacy else self.comment,
            self.citation,
            self.ip_hash,
        )


def from_feedback_record(rec: Sequence[Any]) -> FeedbackRow:
    d = dict(zip(FEEDBACK_COLUMNS, rec, strict=True))
    created = d["created_at"]
    if not isinstance(created, str):  # PostgreSQL's timestamptz
        created = created.astimezone(UTC).isoformat(timespec="microseconds")
    return FeedbackRow(
        query_id=str(d["query_id"]),
        tenant=str(d["tenant"]),
        created_at=created,
        kind=d["kind"],
        ip_hash=str(d["ip_hash"]),
        rating=d["rating"],
        comment=d["comment"],
        citation=None if d["citation"] is None else int(d["citation"]),
    )


def summarize_feedback(
    queries: Sequence[tuple[str, str, int]], feedback: Sequence[FeedbackRow]
) -> list[dict[str, Any]]:
    """Per UTC day of the query (pure): ``queries`` are (query_id, created_at, citations
    in the answer) of the answered queries, ``feedback`` their feedback rows.

    ``helpful_rate``: the share of rated answers whose latest rating is up (a person
    may change their mind); ``citation_click_rate``: the share of answers with at least
    one citation on which at least one citation was clicked (the query log knows
    answers, not people, so this is per answer). ``None`` when nothing to divide by."""
    ratings: dict[str, FeedbackRow] = {}
    clicked: set[str] = set()
    for row in sorted(feedback, key=lambda r: r.created_at):
        if row.kind == "rating" and row.rating is not None:
            ratings[row.query_id] = row
        elif row.kind == "click":
            clicked.add(row.query_id)
    days: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for query_id, created_at, citations in queries:
        day = days[created_at[:10]]
        day["answers"] += 1
        if citations > 0:
            day["with_citations"] += 1
            day["clicked"] += query_id in clicked
        if query_id in ratings:
            day["rated"] += 1
            day["up"] += ratings[query_id].rating == "up"
    return [
        {
            "day": name,
            "answers": d["answers"],
            "rated": d["rated"],
            "helpful": d["up"],
            "helpful_rate": round(d["up"] / d["rated"], 4) if d["rated"] else None,
            "with_citations": d["with_citations"],
            "clicked": d["clicked"],
            "citation_click_rate": round(d["clicked"] / d["with_citations"], 4)
            if d["with_citations"]
            else None,
        }
        for name, d in sorted(days.items())
    ]
