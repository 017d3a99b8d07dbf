"""Client bearer-key check; digests are compared in constant time. The scheme is matched
case-insensitively, as RFC 9110 has it (`bearer <key>` is what some clients send); an exact-case
`Bearer ` match would refuse them.

The key file is someone else's file (a mounted Secret, or local mode's `--api-key-file`): it may
be replaced at any time, by a FIFO or a link to `/dev/zero` too. So it is read on a worker thread,
never on the event loop, as a bounded regular file (`read_regular`: a FIFO, a device or a file over
`KEY_FILE_LIMIT` is no key, and costs nothing), and the key read is used for `KEY_MAX_AGE`
seconds: a rotated Secret takes effect within that time of the file changing, without a restart,
and the requests of a burst share one read. Requests that find the key too old wait for the one
read in progress. The key never reaches a log line or a response; only why it is unavailable
does, once each time that changes.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import functools
import hashlib
import hmac
import logging
import math

from noctaya.core.files import UnexpectedFile, read_regular
from noctaya.gateway.process.describe import describe_error

KEY_FILE_LIMIT = 64 * 1024
"""A key is a few dozen bytes; a file larger than this is not a key file."""
KEY_MAX_AGE = 1.0
"""Seconds a key read is used before the file is read again."""
_BEARER = b"bearer "
log = logging.getLogger("noctaya.gateway.http")


class AuthResult(enum.Enum):
    OK = "ok"
    UNAUTHORIZED = "unauthorized"
    UNAVAILABLE = "authentication_unavailable"


def read_key(path: str) -> bytes:
    """The key in the file `path`, whitespace-trimmed. OSError when the file cannot be read as a
    regular file of at most `KEY_FILE_LIMIT` bytes, ValueError when it holds no key. Blocks: call
    it off the event loop."""
    try:
        content = read_regular(path, KEY_FILE_LIMIT)
    except UnexpectedFile as error:
        if error.errno != errno.ESTALE:
            raise
        # Replaced between being looked at and opened: a rotation (the kubelet swaps the
        # Secret's files at once), so the file there now is the one to read.
        content = read_regular(path, KEY_FILE_LIMIT)
    key = content.strip()
    if not key:
        raise ValueError("client API key must not be empty")
    return key


def _key_digest(path: str) -> bytes | str:
    """The SHA-256 digest of the key in `path`, or why there is none (without the key)."""
    try:
        return hashlib.sha256(read_key(path)).digest()
    except OSError as error:
        return f"read client API key: {describe_error(error)}"
    except ValueError as error:
        return str(error)


class ApiKeyAuth:
    def __init__(self, key_file: str) -> None:
        self._key_file = key_file
        self._digest: bytes | None = None
        self._read_at = -math.inf
        self._reading: asyncio.Future[bytes | str] | None = None
        self._problem = ""

    async def check(self, authorization: bytes | None) -> AuthResult:
        """Judge the first `Authorization` header value (None when absent)."""
        key = await self._current_key()
        if key is None:
            return AuthResult.UNAVAILABLE
        if authorization is None or authorization[: len(_BEARER)].lower() != _BEARER:
            return AuthResult.UNAUTHORIZED
        presented = hashlib.sha256(authorization[len(_BEARER) :]).digest()
        if hmac.compare_digest(presented, key):
            return AuthResult.OK
        return AuthResult.UNAUTHORIZED

    async def _current_key(self) -> bytes | None:
        """The key's digest, read at most KEY_MAX_AGE seconds before; None if it is unavailable."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if now - self._read_at < KEY_MAX_AGE:
            return self._digest
        if self._reading is None:
            self._reading = loop.run_in_executor(None, _key_digest, self._key_file)
            self._reading.add_done_callback(functools.partial(self._read, now))
        # Shielded: a client leaving cancels its wait, not the read the others share.
        result = await asyncio.shield(self._reading)
        return result if isinstance(result, bytes) else None

    def _read(self, started: float, reading: asyncio.Future[bytes | str]) -> None:
        self._reading = None
        result = reading.result()
        self._read_at = started
        self._digest = result if isinstance(result, bytes) else None
        problem = result if isinstance(result, str) else ""
        if problem != self._problem:
            if problem:
                log.warning("gateway authentication unavailable: %s", problem)
            else:
                log.info("gateway authentication available again")
            self._problem = problem
