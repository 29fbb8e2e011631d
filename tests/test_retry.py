"""The shared retry rules: backoff schedule, Retry-After, retryable statuses, messages."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ragline.retry import RetryPolicy, error_message, is_retryable, parse_retry_after


def test_backoff_doubles_from_1_s_and_caps_at_10_s() -> None:
    policy = RetryPolicy()
    assert [policy.delay(a, 0.5) for a in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.delay(200, 0.5) == 10.0


def test_jitter_is_25_percent_and_never_passes_the_cap() -> None:
    policy = RetryPolicy()
    assert policy.delay(0, 0.0) == 0.75 and policy.delay(2, 0.0) == 3.0
    assert policy.delay(1, 0.0) == 1.5
    assert policy.delay(1, 1.0) == 2.5
    assert policy.delay(4, 0.999) == 10.0  # 10 s + 25 % jitter is capped
    assert policy.delay(10, 1.0) == 10.0
    assert policy.delay(4, 0.0) == 7.5  # the cap still gets jitter below it


def test_retry_after_is_obeyed_exactly_up_to_the_limit() -> None:
    for long_retry_after in ("cap", "fail"):
        policy = RetryPolicy(long_retry_after=long_retry_after)
        assert policy.delay(3, 0.2, retry_after=30.0) == 30.0
        assert policy.delay(0, 0.5, retry_after=60.0) == 60.0
        assert policy.delay(0, 0.5, retry_after=0.0) == 0.0


def test_a_long_retry_after_is_capped_or_refused_by_policy() -> None:
    assert RetryPolicy(long_retry_after="cap").delay(0, 0.5, retry_after=3600.0) == 60.0
    assert RetryPolicy(long_retry_after="fail").delay(0, 0.5, retry_after=3600.0) is None
    short = RetryPolicy(max_retry_after_s=5.0, long_retry_after="cap")
    assert short.delay(0, 0.5, retry_after=7.0) == 5.0


def test_policy_rejects_impossible_settings() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="base_s"):
        RetryPolicy(base_s=20.0, cap_s=10.0)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)
    with pytest.raises(ValueError, match="max_retry_after_s"):
        RetryPolicy(max_retry_after_s=-1.0)


def test_parse_retry_after_delta_seconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 2.5 ", now) == 2.5
    assert parse_retry_after("-3", now) == 0.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:20 GMT", now) == 20.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:20 -0000", now) == 20.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("99999", now) == 99999.0  # not capped: that is the policy's job


def test_parse_retry_after_unreadable_is_none() -> None:
    for value in ("soon", "nan", "", "  ", None):
        assert parse_retry_after(value, 0.0) is None, value
    assert parse_retry_after(None) is None


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 599])
def test_retryable_statuses(status: int) -> None:
    assert is_retryable(status)


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 409, 413, 422])
def test_other_statuses_are_not_retried(status: int) -> None:
    assert not is_retryable(status)


def test_error_message_reads_the_openai_shape_and_falls_back_to_the_body() -> None:
    openai = {"error": {"message": "maximum context length is 8192", "type": "invalid"}}
    assert error_message(json.dumps(openai).encode()) == "maximum context length is 8192"
    assert error_message(b'{"error": "model not loaded"}') == "model not loaded"
    assert error_message(b'{"error": {"code": 7}}') == '{"error": {"code": 7}}'
    assert error_message(b"[1, 2]") == "[1, 2]"
    assert error_message(b"  no route /v1/x\n") == "no route /v1/x"
    assert error_message(b"\xff\xfe bad") == "\ufffd\ufffd bad"
    assert error_message(b"") == ""
    assert len(error_message(b"x" * 2000)) == 500
    assert len(error_message(json.dumps({"error": {"message": "y" * 2000}}).encode())) == 500
