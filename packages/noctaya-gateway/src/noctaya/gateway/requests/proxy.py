"""Single-host reverse proxy to the backend: same path and query, bodies streamed both ways and
flushed chunk by chunk (SSE tokens reach the client as the backend writes them), hop-by-hop
headers dropped per RFC 9110 §7.6.1."""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Iterable
from typing import Any

from noctaya.gateway.backend.replicas import Replica, Replicas
from noctaya.gateway.metrics.gateway_metrics import GatewayMetrics
from noctaya.gateway.requests.client import BodyTooLarge, ClientChannel, ClientGone
from noctaya.gateway.requests.responses import (
    BACKEND_TIMEOUT,
    BACKEND_UNREACHABLE,
    GatewayError,
    Headers,
    Send,
)
from noctaya.gateway.upstream import (
    NotConnected,
    UpstreamError,
    UpstreamPool,
    UpstreamResponse,
    UpstreamTimeout,
)

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
# Host and framing come from the upstream client; Date is the gateway server's own.
_REQUEST_DROP = HOP_BY_HOP | {b"host", b"content-length"}
_RESPONSE_DROP = HOP_BY_HOP | {b"date"}
_NO_CONTENT_DROP = _RESPONSE_DROP | {b"content-length"}
_BODY_END: dict[str, Any] = {"type": "http.response.body", "body": b"", "more_body": False}


class UpstreamUnavailable(Exception):
    """The backend could not be reached, failed or stalled before sending a response head;
    `error` is what the client is told (502, or 504 for a stall). `unsent`: no connection could
    be made, so nothing of the request reached the backend."""

    def __init__(self, message: str, error: GatewayError, *, unsent: bool = False) -> None:
        super().__init__(message)
        self.error = error
        self.unsent = unsent


class UpstreamAborted(Exception):
    """The backend failed after the response started; the client exchange must be aborted."""


def _connection_tokens(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Header names the sender declared hop-by-hop in `Connection`."""
    tokens: set[bytes] = set()
    for name, value in headers:
        if name == b"connection":
            tokens.update(token.strip().lower() for token in value.split(b","))
    return frozenset(tokens)


class Upstream:
    def __init__(
        self,
        pool: UpstreamPool,
        metrics: GatewayMetrics,
        *,
        strip_authorization: bool,
        replicas: Replicas | None = None,
    ) -> None:
        """Requests go to `pool`, or, given `replicas` that follow the backend's pods, to one of
        them while that works."""
        self._pool = pool
        self._replicas = replicas
        self._metrics = metrics
        self._request_drop = _REQUEST_DROP | ({b"authorization"} if strip_authorization else set())

    def request_headers(self, scope: dict[str, Any]) -> tuple[Headers, int | None]:
        """End-to-end headers to forward (X-Forwarded-For appended) and the declared length."""
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        drop = self._request_drop
        listed = _connection_tokens(raw)
        if listed:
            drop = drop | listed
        headers: Headers = []
        forwarded_for: list[bytes] = []
        declared: int | None = None
        for name, value in raw:
            if name == b"content-length" and value.isdigit():
                declared = int(value)
            if name in drop:
                continue
            if name == b"x-forwarded-for":
                forwarded_for.append(value)
                continue
            headers.append((name, value))
        client = scope.get("client")
        if client:
            forwarded_for.append(client[0].encode())
        if forwarded_for:
            headers.append((b"x-forwarded-for", b", ".join(forwarded_for)))
        return headers, declared

    def forward(
        self,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes | AsyncIterable[bytes],
        send: Send,
        *,
        committed: bool = False,
    ) -> Awaitable[None]:
        """Proxy one exchange. When `committed`, the client already has its response head (a
        keepalive stream), so only the backend's body is relayed and the stream left open.

        A backend failing before its response head is UpstreamUnavailable, answered by the
        caller (an error response, or the closing error event of a committed stream); once its
        response reaches the client, the exchange can only be aborted (UpstreamAborted).

        To the Service URL, or, while the gateway follows the backend's pods, to the replica
        `Replicas.choose` picks: one that cannot be connected to is set aside and the next
        tried, since nothing of the request reached it."""
        replicas = self._replicas
        if replicas is None or not replicas.pods:  # the exchange's coroutine: no frame more
            return self._exchange(self._pool, scope, channel, body, send, committed)
        return self._spread(replicas, scope, channel, body, send, committed)

    async def _spread(
        self,
        replicas: Replicas,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes | AsyncIterable[bytes],
        send: Send,
        committed: bool,
    ) -> None:
        tried: list[Replica] = []
        while (replica := replicas.choose(tried)) is not None:
            replica.in_flight += 1
            try:
                await self._exchange(replica.pool, scope, channel, body, send, committed)
                return
            except UpstreamUnavailable as failure:
                if not failure.unsent:
                    raise
                replicas.set_aside(replica)
                tried.append(replica)
            finally:
                replica.in_flight -= 1
        raise UpstreamUnavailable("no replica could be reached", BACKEND_UNREACHABLE, unsent=True)

    async def _exchange(
        self,
        pool: UpstreamPool,
        scope: dict[str, Any],
        channel: ClientChannel,
        body: bytes | AsyncIterable[bytes],
        send: Send,
        committed: bool,
    ) -> None:
        started = committed
        answered = False
        target = pool.path_prefix + scope["raw_path"]
        if scope["query_string"]:
            target += b"?" + scope["query_string"]
        headers, declared = self.request_headers(scope)
        try:
            async with pool.exchange(scope["method"], target, headers, body, declared) as response:
                answered = True
                if not committed:
                    await send(
                        {
                            "type": "http.response.start",
                            "status": response.status,
                            "headers": _response_headers(response.status, response.headers),
                        }
                    )
                    self._metrics.count_response(response.status)
                    started = True
                await _relay(response, send, end=not committed)
        except (BodyTooLarge, ClientGone) as error:
            if started:
                raise UpstreamAborted(type(error).__name__) from error
            raise
        except UpstreamError as error:
            if channel.failure is not None:
                raise channel.failure from None
            if answered:
                raise UpstreamAborted(str(error) or type(error).__name__) from error
            answer = BACKEND_TIMEOUT if isinstance(error, UpstreamTimeout) else BACKEND_UNREACHABLE
            raise UpstreamUnavailable(
                str(error) or type(error).__name__, answer, unsent=isinstance(error, NotConnected)
            ) from error


def _response_headers(status: int, raw: list[tuple[bytes, bytes]]) -> Headers:
    """End-to-end headers; a 204 keeps no Content-Length (RFC 9110 forbids one, and HTTP/2
    clients take it as a promise of body bytes)."""
    drop = _RESPONSE_DROP if status != 204 else _NO_CONTENT_DROP
    listed = _connection_tokens(raw)
    if listed:
        drop = drop | listed
    return [(name, value) for name, value in raw if name not in drop]


async def _relay(response: UpstreamResponse, send: Send, *, end: bool) -> None:
    """Copy the backend body as it arrives; the last chunk carries the end when known."""
    while chunk := await response.read_chunk():
        last = end and response.ended
        await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        if last:
            return
    if end:
        await send(_BODY_END)
