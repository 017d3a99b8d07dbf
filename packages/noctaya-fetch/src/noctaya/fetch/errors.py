"""Fetch failures as values: which source failed, why, and whether trying again can help."""

from __future__ import annotations

import email.utils
import time

TRANSIENT_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
"""Statuses a retry can fix; every other 4xx (404, 401, 403, …) is the request's own fault."""


class FetchError(Exception):
    """A failed delivery; the message names the source so a Job log needs no context."""

    transient = False

    def __init__(self, source: str, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason
        self.retry_after = retry_after


class PermanentFetchError(FetchError):
    """Retrying cannot help: not found, not allowed, wrong bytes, unsafe content."""


class TransientFetchError(FetchError):
    """The network or the server may recover: resets, 5xx, 429."""

    transient = True


def http_failure(source: str, status: int, what: str, retry_after: str | None = None) -> FetchError:
    """The error for an HTTP status: transient for 429/5xx (with the server's Retry-After)."""
    reason = f"{what} failed with HTTP {status} ({_status_words(status)})"
    if status in TRANSIENT_STATUSES or status >= 500:
        return TransientFetchError(source, reason, retry_after=parse_retry_after(retry_after))
    return PermanentFetchError(source, reason)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_words(status: int) -> str:
    words = {
        401: "unauthorized: check the credentials",
        403: "forbidden: the credentials do not grant access",
        404: "not found",
        429: "too many requests",
    }
    if status in words:
        return words[status]
    return "server error" if status >= 500 else "client error"
