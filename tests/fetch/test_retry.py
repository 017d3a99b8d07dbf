"""The one retry policy: what is retried, how long it waits, and when it gives up."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest
from noctaya.fetch.errors import (
    PermanentFetchError,
    TransientFetchError,
    http_failure,
    parse_retry_after,
)
from noctaya.fetch.retry import RetryPolicy

QUICK = RetryPolicy(attempts=3, initial=0.01, maximum=0.05)


class Flaky:
    """Fails with the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_transient_failures_are_retried_until_one_succeeds() -> None:
    flaky = Flaky(TransientFetchError("hf://a/b", "reset"), TransientFetchError("hf://a/b", "503"))

    assert QUICK.call(flaky) == "ok"
    assert flaky.calls == 3


def test_a_permanent_failure_is_never_retried() -> None:
    flaky = Flaky(PermanentFetchError("hf://a/b", "not found"))

    with pytest.raises(PermanentFetchError):
        RetryPolicy(attempts=5, initial=10).call(flaky)
    assert flaky.calls == 1


def test_the_last_transient_failure_is_raised_once_the_attempts_are_spent() -> None:
    flaky = Flaky(*(TransientFetchError("hf://a/b", f"try {n}") for n in range(5)))

    with pytest.raises(TransientFetchError, match="try 2"):
        QUICK.call(flaky)
    assert flaky.calls == 3


def test_retry_after_is_a_floor_the_jittered_backoff_never_shortens() -> None:
    flaky = Flaky(TransientFetchError("hf://a/b", "429", retry_after=0.4))
    started = time.monotonic()

    QUICK.call(flaky)

    assert time.monotonic() - started >= 0.4


@pytest.mark.parametrize(
    ("status", "transient"),
    [(404, False), (401, False), (403, False), (400, False), (429, True), (500, True), (503, True)],
)
def test_http_statuses_are_classified_permanent_or_transient(status: int, transient: bool) -> None:
    error = http_failure("oci://r/x@sha256:1", status, "manifest request")

    assert error.transient is transient
    assert str(error).startswith(f"oci://r/x@sha256:1: manifest request failed with HTTP {status}")


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("7") == 7.0
    assert 9 <= (parse_retry_after(formatdate(time.time() + 10, usegmt=True)) or 0) <= 10
    assert parse_retry_after("soon") is None
    assert http_failure("s", 429, "download", "3").retry_after == 3.0
