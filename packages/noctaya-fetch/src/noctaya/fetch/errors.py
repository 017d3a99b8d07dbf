"""Fetch failures as values: which source failed, why, and whether trying again can help."""

from __future__ import annotations

import email.utils
import errno
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

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


@dataclass(frozen=True, slots=True)
class _Verdict:
    transient: bool
    words: str
    """What failed, ahead of the system's own words in the failure line."""


_NETWORK = _Verdict(True, "connection failed")
_FULL = _Verdict(True, "the cache volume is full")
_SHORT = _Verdict(True, "a resource ran short")
_STORAGE = _Verdict(True, "the cache volume failed")
_VANISHED = _Verdict(True, "a path vanished while it was used")
_NOT_WRITABLE = _Verdict(False, "the cache is not writable")
_WRONG_ENTRY = _Verdict(False, "an entry in the cache is not what its layout needs")
_PATH_LIMIT = _Verdict(False, "the cache's filesystem cannot hold this path")

ERRNO_VERDICTS: Mapping[int, _Verdict] = MappingProxyType(
    {
        # Transient: the cause goes away without anyone changing the Job, so a later try (the
        # retry policy's, then the Job's next pod) can finish.
        # The network and the server: a reset, refusal or timeout is the commonest hub failure.
        **dict.fromkeys(
            (
                errno.ECONNRESET,
                errno.ECONNREFUSED,
                errno.ECONNABORTED,
                errno.EPIPE,
                errno.ETIMEDOUT,
                errno.ENETUNREACH,
                errno.ENETDOWN,
                errno.EHOSTUNREACH,
                errno.EHOSTDOWN,
            ),
            _NETWORK,
        ),
        # Space: other models are evicted, another fetcher's `.partial` is removed, the volume
        # is grown; nothing about this fetch has to change.
        errno.ENOSPC: _FULL,
        errno.EDQUOT: _FULL,
        # Contention and exhaustion that pass: memory, descriptors, a busy or interrupted call.
        **dict.fromkeys(
            (
                errno.EAGAIN,
                errno.EBUSY,
                errno.EINTR,
                errno.ENOMEM,
                errno.ENOBUFS,
                errno.EMFILE,
                errno.ENFILE,
                errno.ETXTBSY,
            ),
            _SHORT,
        ),
        # A disk or network filesystem that answers again (an NFS server back, a stale handle
        # looked up afresh by the next pod).
        errno.EIO: _STORAGE,
        errno.ESTALE: _STORAGE,
        # Another process removed a path (a fetcher taking over, a cleanup): the next try
        # creates it again.
        errno.ENOENT: _VANISHED,
        # Permanent: every try of the same pod spec meets the same cache, so the Job fails at
        # once (`noctaya.core.cache_planning.FETCH_PERMANENT_FAILURE`) instead of retrying.
        # A volume mounted read-only, or owned by a user the Job does not run as.
        errno.EROFS: _NOT_WRITABLE,
        errno.EACCES: _NOT_WRITABLE,
        errno.EPERM: _NOT_WRITABLE,
        # Something of the wrong kind where the layout needs a directory or a regular file, put
        # there by hand or planted: a symlink loop, a directory, a file, an entry that exists,
        # and what `noctaya.core.files` refuses (a FIFO or device, a second hard link, a file
        # too large). The fetcher does not remove what it did not create.
        **dict.fromkeys(
            (
                errno.ELOOP,
                errno.EISDIR,
                errno.ENOTDIR,
                errno.EEXIST,
                errno.EINVAL,
                errno.EMLINK,
                errno.EFBIG,
            ),
            _WRONG_ENTRY,
        ),
        # A name longer than the filesystem allows, or a rename across filesystems: the paths
        # are the same on every try.
        errno.ENAMETOOLONG: _PATH_LIMIT,
        errno.EXDEV: _PATH_LIMIT,
    }
)
"""What each errno says about trying again; an errno not listed is not classified (the
command exits with `EXIT_INTERNAL`, which a Job retries like a transient failure)."""


def os_failure(source: str, error: OSError) -> FetchError | None:
    """The table's verdict on `error` as a failure naming the source; None when its errno is
    not listed, or is not an errno at all (TLS and name-lookup errors number their own codes)."""
    if isinstance(error, ssl.SSLError) or error.errno is None:
        return None
    verdict = ERRNO_VERDICTS.get(error.errno)
    if verdict is None:
        return None
    failure = TransientFetchError if verdict.transient else PermanentFetchError
    return failure(source, f"{verdict.words}: {describe(error)}")


def describe(error: BaseException) -> str:
    """The error's type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


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
