"""The one retry policy of model delivery: transient failures back off, permanent ones end it.

Exponential backoff with jitter spreads the retries of many prewarm Jobs hitting one hub; a
server's Retry-After is a floor, never shortened by the jitter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from noctaya.fetch.errors import FetchError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

T = TypeVar("T")
log = logging.getLogger("noctaya.fetch")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 6
    """Tries in all, the first included; 1 means no retry."""
    initial: float = 1.0
    """Seconds before the first retry; doubles each time, plus up to `initial` of jitter."""
    maximum: float = 60.0

    def call(self, operation: Callable[[], T]) -> T:
        """Run `operation`, retrying a `TransientFetchError`; anything else ends it at once."""
        backoff = wait_exponential_jitter(
            multiplier=self.initial, max=self.maximum, jitter=self.initial
        )

        def wait(state: RetryCallState) -> float:
            error = _error(state)
            floor = error.retry_after if error is not None and error.retry_after else 0.0
            return max(floor, backoff(state))

        def announce(state: RetryCallState) -> None:
            error = _error(state)
            delay = state.next_action.sleep if state.next_action else 0.0
            log.warning(
                "%s (attempt %d of %d); retrying in %.1f s",
                error,
                state.attempt_number,
                self.attempts,
                delay,
            )

        retrying = Retrying(
            stop=stop_after_attempt(max(1, self.attempts)),
            wait=wait,
            retry=retry_if_exception(lambda error: getattr(error, "transient", False) is True),
            before_sleep=announce,
            reraise=True,
        )
        return retrying(operation)


def _error(state: RetryCallState) -> FetchError | None:
    outcome = state.outcome
    if outcome is None or not outcome.failed:
        return None
    error = outcome.exception()
    return error if isinstance(error, FetchError) else None
