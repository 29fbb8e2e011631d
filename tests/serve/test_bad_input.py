"""Input that used to get through to a 500 or a leaky 503: lone surrogates, integer
filters beyond their column, and 405s with a wrong ``Allow`` header."""

from __future__ import annotations

import re

import httpx
import pytest

from .conftest import LiveServer

#: Things an error body must never show: SQL, file paths, the tenant column.
INTERNALS = re.compile(r"SELECT|WHERE|tenant\s*=|/tmp/|/home/|\.py\b|Traceback", re.I)


def post_raw(c: httpx.Client, path: str, raw: str) -> httpx.Response:
    return c.post(path, content=raw.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        ("/api/query", '{"question": "what is \\ud800 rrf?"}', "question"),
        ("/api/query", '{"question": "what is rrf?", "context": "x \\udfff y"}', "context"),
        ("/api/chat", '{"message": "what is \\ud800 rrf?"}', "message"),
        ("/api/search", '{"query": "rrf \\ud800"}', "query"),
        (
            "/v1/chat/completions",
            '{"model": "ragline", "messages": [{"role": "user", "content": "rrf \\ud800?"}]}',
            "messages",
        ),
    ],
)
def test_lone_surrogate_is_a_400_naming_the_field(
    docs_server: LiveServer, path: str, raw: str, field: str
) -> None:
    with docs_server.client() as c:
        r = post_raw(c, path, raw)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["field"] == field and "surrogate" in body["message"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("page", 2**63), ("page", 2**31), ("chunk_index", -(2**40)), ("start_char", 2**63)],
)
def test_integer_filter_out_of_range_is_a_400(
    docs_server: LiveServer, key: str, value: int
) -> None:
    with docs_server.client() as c:
        for path, q in (("/api/search", "query"), ("/api/query", "question")):
            r = c.post(path, json={q: "what is rrf?", "filters": {key: value}})
            assert r.status_code == 400, r.text
            body = r.json()
            assert body["field"] == f"filters.{key}" and "range" in body["message"]
            assert not INTERNALS.search(r.text)
        ok = c.post("/api/search", json={"query": "what is rrf?", "filters": {key: 3}})
        assert ok.status_code == 200


def test_integer_filter_written_with_a_zero_fraction_is_that_integer(
    docs_server: LiveServer,
) -> None:
    """JSON has one number type: ``2.0`` is what the schema's ``integer`` accepts, so it
    filters as 2; ``2.5`` still names the field."""
    with docs_server.client() as c:
        for path, q in (("/api/search", "query"), ("/api/query", "question")):
            as_int = post_raw(c, path, f'{{"{q}": "what is rrf?", "filters": {{"page": 2}}}}')
            as_float = post_raw(c, path, f'{{"{q}": "what is rrf?", "filters": {{"page": 2.0}}}}')
            assert as_float.status_code == as_int.status_code == 200, as_float.text
            if path == "/api/search":
                assert as_float.json()["hits"] == as_int.json()["hits"]
            bad = post_raw(c, path, f'{{"{q}": "what is rrf?", "filters": {{"page": 2.5}}}}')
            assert bad.status_code == 400 and bad.json()["field"] == "filters.page"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/api/documents", {"GET", "POST"}),
        ("PATCH", "/api/documents/abc", {"GET", "DELETE"}),
        ("GET", "/api/query", {"POST"}),
        ("DELETE", "/api/conversations", {"GET"}),
        ("POST", "/healthz", {"GET"}),
    ],
)
def test_405_names_every_allowed_method(
    docs_server: LiveServer, method: str, path: str, allowed: set[str]
) -> None:
    with docs_server.client() as c:
        r = c.request(method, path)
    assert r.status_code == 405
    got = {m.strip() for m in r.headers["allow"].split(",")} - {"HEAD"}
    assert got == allowed
    assert r.json()["status_code"] == 405


def test_metric_labels_are_route_templates(docs_server: LiveServer) -> None:
    """Ids in paths must not become label values (one series per id)."""
    from .conftest import metric_value

    with docs_server.client() as c:
        c.get("/api/documents/nope-1")
        c.get("/api/documents/nope-2")
        text = c.get("/metrics").text
    assert "nope-1" not in text
    seen = metric_value(
        text, "ragline_http_requests_total", endpoint="/api/documents/{doc_id}", status="404"
    )
    assert seen >= 2


def test_lone_surrogate_in_a_filter_key_is_a_400(docs_server: LiveServer) -> None:
    """The key, not only the value, must be valid Unicode (it was the fuzzer's only 500:
    the error body naming the key could not be encoded)."""
    with docs_server.client() as c:
        for path, q in (("/api/search", "query"), ("/api/query", "question")):
            r = post_raw(c, path, f'{{"{q}": "what is rrf?", "filters": {{"pa\\ud800ge": 1}}}}')
            assert r.status_code == 400, r.text
            body = r.json()
            assert body["field"].startswith("filters.") and "surrogate" in body["message"]


@pytest.mark.parametrize("key", ["end_char", "start_char"])
def test_most_negative_64_bit_filter_is_a_400_not_a_503(docs_server: LiveServer, key: str) -> None:
    """``-9223372036854775808`` is in int64's range but the engine's SQL cannot read it
    back (``-`` applied to an overflowing literal): the client's filter is at fault."""
    with docs_server.client() as c:
        for path, q in (("/api/search", "query"), ("/api/query", "question")):
            r = c.post(path, json={q: "what is rrf?", "filters": {key: -(2**63)}})
            assert r.status_code == 400, r.text
            assert r.json()["field"] == f"filters.{key}" and "range" in r.json()["message"]
        ok = c.post("/api/search", json={"query": "what is rrf?", "filters": {key: -(2**63) + 1}})
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize(
    ("filters", "field", "words"),
    [
        (
            {"version": {"$like": "2"}},
            "filters.version",
            ["'version'", "$like", "unknown operator"],
        ),
        ({"$or": [{"date": {"$gt": True}}]}, "filters.date", ["'date'", "$gt", "booleans"]),
        ({"page": {"$in": 3}}, "filters.page", ["'page'", "$in", "list"]),
        ({"has_code": {"$ne": "yes"}}, "filters.has_code", ["'has_code'", "$ne", "bool"]),
        ({"$nor": [{"a": 1}]}, "filters", ["'$nor'", "unknown operator"]),
        ({"$not": []}, "filters", ["'$not'", "one filter object"]),
        ({"tags": ["a"]}, "filters.tags", ["'tags'", "$in"]),
        ({"bad key": 1}, "filters.bad key", ["'bad key'", "metadata key"]),
    ],
)
def test_invalid_filter_is_a_400_naming_key_and_operator(
    docs_server: LiveServer, filters: dict[str, object], field: str, words: list[str]
) -> None:
    with docs_server.client() as c:
        for path, q in (("/api/search", "query"), ("/api/query", "question")):
            r = c.post(path, json={q: "what is rrf?", "filters": filters})
            assert r.status_code == 400, r.text
            body = r.json()
            assert body["field"] == field, body
            assert all(w in body["message"] for w in words), body
            assert not INTERNALS.search(r.text)


def test_too_many_filter_conditions_or_values_is_a_400(docs_server: LiveServer) -> None:
    with docs_server.client() as c:
        many = {"$or": [{"chapter": f"c{i}"} for i in range(17)]}
        r = c.post("/api/search", json={"query": "rrf", "filters": many})
        assert r.status_code == 400 and "conditions" in r.json()["message"]
        values = {"chapter": {"$in": [f"c{i}" for i in range(257)]}}
        r = c.post("/api/search", json={"query": "rrf", "filters": values})
        assert r.status_code == 400 and "256 values" in r.json()["message"]
