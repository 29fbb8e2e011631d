"""``POST /api/search``: ranked chunks for a query, without an answer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from ragline.serve import schemas as s
from ragline.serve.deps import CallerDep, StateDep, elapsed_ms, finish_row, wait_ready
from ragline.serve.errors import ERROR_RESPONSES, engine_error
from ragline.serve.inputs import clean_question, search_options
from ragline.serve.requestlog import mark_logged
from ragline.serve.state import new_query_id
from ragline.store.base import StoreError
from ragline.types import SearchResult

router = APIRouter(tags=["search"])


@router.post(
    "/api/search",
    response_model=s.SearchResponse,
    responses=ERROR_RESPONSES,
    summary="Ranked chunks for a query (no answer)",
)
async def search(body: s.SearchRequest, who: CallerDep, state: StateDep) -> dict[str, Any]:
    settings = state.settings
    query_text = clean_question(body.query, "query", settings)
    options = search_options(body.max_results, body.mode, body.filters, who.tenant, settings)
    await wait_ready(state)
    query_id = new_query_id()
    row = state.start_row(who, "/api/search", query_text, query_id)

    def search_and_log() -> SearchResult:
        """The search and, on success, its query-log row: one worker-thread hop."""
        result = state.search(query_text, **options)
        for stage, ms in result.timings_ms.items():
            state.metrics.stage_seconds.labels(stage=f"search.{stage}").observe(ms / 1000.0)
        row.retrieved_chunk_ids = [h.chunk.id for h in result.hits]
        row.latencies_ms = dict(result.timings_ms)
        row.finish(200, None, elapsed_ms(row))
        state.log_row(row)
        return result

    try:
        result = await run_in_threadpool(search_and_log)
    except (ValueError, StoreError) as exc:
        problem = engine_error(exc)
        await finish_row(state, row, problem.status_code, problem.message, None)
        raise problem from None
    mark_logged()
    return {**result.to_dict(), "query_id": query_id}
