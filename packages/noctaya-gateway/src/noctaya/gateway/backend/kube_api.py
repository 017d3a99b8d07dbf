"""The Kubernetes API server as the gateway reaches it: its own HTTP client (`upstream`) over
TLS with the pod's CA, and the pod's ServiceAccount token, for the one list-and-watch it makes
(`endpoints`). No Kubernetes client library: the gateway's idle memory is a feature, and one
GET with a label selector is all it asks.

The token is projected and rotated by the kubelet, so it is read again for every request (off
the event loop, at most `TOKEN_LIMIT` bytes); the CA bundle with every new connection pool. The
token never appears in a log line or an error message.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import stat
from typing import Any

from noctaya.gateway.upstream import UpstreamPool
from noctaya.gateway.upstream.pool import Exchange

TOKEN_LIMIT = 64 * 1024
CA_LIMIT = 1024 * 1024
LIST_LIMIT = 16 * 1024 * 1024
"""The largest list answer read: a Service's EndpointSlices hold at most 100 endpoints each."""
_JSON = (b"accept", b"application/json")


class ApiRefused(Exception):
    """The watch cannot work as configured (no token, no CA, 401 or 403): the gateway falls
    back to the Service URL and tries again later."""


class ApiStatus(Exception):
    """The API server answered something other than 200 (410 Gone: list again)."""

    def __init__(self, status: int) -> None:
        super().__init__(f"API server answered {status}")
        self.status = status


def read_token(path: str) -> bytes:
    """Blocking: call it in a thread."""
    token = _read(path, TOKEN_LIMIT, "token").strip()
    if not token or not all(0x21 <= byte <= 0x7E for byte in token):
        raise ValueError("the token file holds no token")
    return token


def _read(path: str, limit: int, what: str) -> bytes:
    """Blocking: at most `limit` bytes of the file, or ValueError. Opened without blocking and
    read only if it is a regular file (the kubelet's files are reached through symlinks): a
    FIFO or a device put in its place is refused, not waited on."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError(f"the {what} file is not a regular file")
        content = file.read(limit + 1)
    if len(content) > limit:
        raise ValueError(f"the {what} file is larger than {limit} bytes")
    return content


class KubeApi:
    def __init__(self, url: str, token_file: str, ca_file: str, read_timeout: float) -> None:
        self._url = url
        self._token_file = token_file
        self._ca_file = ca_file
        self._read_timeout = read_timeout
        self._pool: UpstreamPool | None = None

    async def connect(self) -> None:
        """A fresh connection pool, verifying the server with the CA bundle as it is now.

        The file is read in a thread and parsed here: OpenSSL's allocations then land in the
        loop thread's heap, not in a heap of the reading thread's own (0.3 MiB less resident)."""
        try:
            pem = await asyncio.to_thread(_read, self._ca_file, CA_LIMIT, "CA")
            context = ssl.create_default_context(cadata=pem.decode("ascii"))
        except (OSError, ValueError, ssl.SSLError) as error:
            raise ApiRefused(f"cannot load the CA file {self._ca_file}: {error}") from None
        self.close()
        self._pool = UpstreamPool(
            self._url, connect_timeout=10.0, read_timeout=self._read_timeout, ssl_context=context
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.retire()
            self._pool = None

    async def get_json(self, target: bytes) -> Any:
        """The document at `target`; ApiRefused, ApiStatus, or an upstream error otherwise."""
        async with await self.get(target) as response:
            status_ok(response.status)
            parts: list[bytes] = []
            size = 0
            while chunk := await response.read_chunk():
                size += len(chunk)
                if size > LIST_LIMIT:
                    raise ValueError(f"the API server's answer is larger than {LIST_LIMIT} bytes")
                parts.append(chunk)
        return json.loads(b"".join(parts))

    async def get(self, target: bytes) -> Exchange:
        """`async with` it for the response (a watch reads it line by line)."""
        assert self._pool is not None, "connect() first"
        try:
            token = await asyncio.to_thread(read_token, self._token_file)
        except OSError as error:
            raise ApiRefused(
                f"cannot read the token file {self._token_file}: {error.strerror}"
            ) from None
        except ValueError as error:
            raise ApiRefused(str(error)) from None
        headers = [(b"authorization", b"Bearer " + token), _JSON]
        return self._pool.exchange("GET", target, headers)


def status_ok(status: int) -> None:
    if status in (401, 403):
        raise ApiRefused(f"the API server refused the watch ({status}): check the RBAC")
    if status != 200:
        raise ApiStatus(status)
