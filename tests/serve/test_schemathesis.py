"""schemathesis against the live server's OpenAPI document: no 5xx, responses match
the documented schemas, status codes and content types, and a request the schema
accepts is not refused with a 400 (the schema says what the server enforces)."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import LiveServer


@pytest.fixture(scope="module")
def fuzz_server(docs_index: Path, embedder) -> LiveServer:  # type: ignore[no-untyped-def]
    from ragline.settings import Settings

    from .conftest import start_server, stop_server

    live = start_server(
        Settings(index_dir=docs_index, rate_limit_per_minute=0, query_log_salt="s"), embedder
    )
    yield live
    stop_server(live)


def test_openapi_contract(fuzz_server: LiveServer) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")
    # Uploads and deletes are exercised by the API tests; fuzzing them would write to
    # the shared index.
    ops = schema.exclude(method="DELETE").exclude(path="/api/documents", method="POST")
    failures: list[str] = []
    checks = [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_schema_conformance,
        positive_data_acceptance,  # what the schema accepts, the server accepts
    ]
    for result in ops.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=12,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(case=operation.as_strategy())
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=checks, timeout=60)

        try:
            run()
        except Exception as exc:  # collect every operation's failure, then fail once
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
