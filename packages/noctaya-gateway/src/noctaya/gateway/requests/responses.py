"""Responses the gateway writes itself: OpenAI-shaped JSON errors on `/v1/*` so SDKs surface the
message, plain text elsewhere (the message and a newline, with `nosniff`). Bodies are rendered
once, at import.

Statuses, messages and plain-text bodies are the reference implementation's, byte for byte, on
purpose: clients and tests compare them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]
Headers = list[tuple[bytes, bytes]]

PLAIN_TEXT = b"text/plain; charset=utf-8"
JSON = b"application/json"
NOSNIFF = (b"x-content-type-options", b"nosniff")
CLOSE = (b"connection", b"close")


@dataclass(frozen=True)
class GatewayError:
    """An error of the gateway's own; `code` is also the OpenAI `error.code`."""

    status: int
    message: str
    type: str
    code: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    _plain: bytes = field(init=False, repr=False)
    _openai: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_plain", self.message.encode() + b"\n")
        object.__setattr__(self, "_openai", self.sse_data().encode() + b"\n")

    def sse_data(self) -> str:
        """The OpenAI error object as one JSON line."""
        body = {"error": {"message": self.message, "type": self.type, "code": self.code}}
        return json.dumps(body, separators=(",", ":"))

    def body(self, openai: bool) -> tuple[bytes, bytes]:
        """(content type, body) in the shape the route calls for."""
        return (JSON, self._openai) if openai else (PLAIN_TEXT, self._plain)


_RETRY_5 = ((b"retry-after", b"5"),)
_RETRY_10 = ((b"retry-after", b"10"),)

UNAUTHORIZED = GatewayError(
    401,
    "unauthorized",
    "authentication_error",
    "unauthorized",
    ((b"www-authenticate", b'Bearer realm="noctaya"'),),
)
AUTHENTICATION_UNAVAILABLE = GatewayError(
    503, "gateway authentication unavailable", "server_error", "authentication_unavailable"
)
QUEUE_FULL = GatewayError(429, "gateway queue full", "rate_limit_error", "queue_full", _RETRY_5)
COLD_START = GatewayError(503, "backend not ready", "server_error", "cold_start", _RETRY_10)
ACTIVATION_TIMEOUT = GatewayError(
    503, "backend not ready", "server_error", "activation_timeout", _RETRY_10
)
BODY_TOO_LARGE = GatewayError(
    413, "request body too large", "invalid_request_error", "request_too_large"
)
BACKEND_UNREACHABLE = GatewayError(502, "backend unreachable", "server_error", "bad_gateway")
REQUEST_TIMEOUT = GatewayError(
    408, "request body not received in time", "invalid_request_error", "request_timeout"
)
METHOD_NOT_ALLOWED = GatewayError(
    405,
    "method not allowed",
    "invalid_request_error",
    "method_not_allowed",
    ((b"allow", b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),),
)
"""CONNECT: the gateway is an origin server for its routes, not a tunnel."""
WEBSOCKET_UNSUPPORTED = GatewayError(
    400, "websocket upgrade not supported", "invalid_request_error", "websocket_unsupported"
)
BACKEND_TIMEOUT = GatewayError(504, "backend timeout", "server_error", "gateway_timeout")
STREAM_TIMEOUT = GatewayError(
    503, "backend activation timeout", "server_error", "activation_timeout"
)
"""The `event: error` frame ending a committed keepalive stream (status is already 200)."""


def is_openai_path(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


async def send_error(send: Send, error: GatewayError, openai: bool, kind: str = "http") -> None:
    """`kind` "websocket" answers a WebSocket handshake this way (ASGI's denial response)."""
    content_type, body = error.body(openai)
    headers: Headers = [
        (b"content-type", content_type),
        NOSNIFF,
        (b"content-length", str(len(body)).encode()),
        *error.headers,
    ]
    prefix = "websocket." if kind == "websocket" else ""
    await send({"type": f"{prefix}http.response.start", "status": error.status, "headers": headers})
    await send({"type": f"{prefix}http.response.body", "body": body})


def closing(send: Send) -> Send:
    """HTTP/1.x: `send`, with the connection closed after this response."""

    async def closed_after(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), CLOSE]}
        await send(message)

    return closed_after


async def send_body(send: Send, status: int, content_type: bytes, body: bytes) -> None:
    headers: Headers = [(b"content-length", str(len(body)).encode())]
    if content_type:
        headers.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_bad_request(send: Send, *, close: bool) -> None:
    """A request whose target the gateway cannot route: a bare `400 Bad Request` and, on
    HTTP/1.x, the connection closed after it, since what follows such a request cannot be
    trusted to be framed as the client meant."""
    body = b"400 Bad Request"
    headers: Headers = [(b"content-type", PLAIN_TEXT), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append(CLOSE)
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def sse_error_frame(error: GatewayError, openai: bool) -> bytes:
    """The frame that ends a committed stream: JSON data on `/v1/*` (the OpenAI SDK raises it as
    an APIError), the bare message as plain text elsewhere."""
    data = error.sse_data() if openai else error.message
    return f"event: error\ndata: {data}\n\n".encode()
