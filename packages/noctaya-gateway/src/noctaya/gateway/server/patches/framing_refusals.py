"""HTTP/1.1 requests refused before the app runs, answered in the shape of the route they name.

h11 refuses what it will not guess at: conflicting or negative `Content-Length` (400), a head
over `h11_max_incomplete_size` (431), a transfer coding other than chunked (501). Hypercorn
answers those with an empty body, which an OpenAI SDK shows as a bare status. Like the app's own
errors, a refusal here carries the OpenAI error object on a `/v1/*` target, and plain text
elsewhere. h11 does not hand over a head it refuses, so the target is read from the first bytes
of the head as they arrived; where it is not known (no request line, or one cut short before its
path could be told apart from `/v1x`, or a pipelined head that arrived behind the previous
request's body) the answer is plain text.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any
from urllib.parse import unquote

import h11
from hypercorn.events import Event, RawData
from hypercorn.protocol.h11 import H11Protocol
from noctaya.gateway.requests.request_target import origin_form
from noctaya.gateway.requests.responses import CLOSE, NOSNIFF, GatewayError, is_openai_path

HEAD_START = 1024
"""How much of a request head's first bytes is kept to find its target."""

_REFUSALS = {
    error.status: error
    for error in (
        GatewayError(400, "malformed request", "invalid_request_error", "bad_request"),
        GatewayError(
            431,
            "request header fields too large",
            "invalid_request_error",
            "request_header_fields_too_large",
        ),
        GatewayError(
            501, "transfer coding not implemented", "invalid_request_error", "not_implemented"
        ),
    )
}


def refusal(status: int) -> GatewayError:
    """The error for a status h11 hints at (400, 431 or 501; another is named by its phrase)."""
    known = _REFUSALS.get(status)
    if known is not None:
        return known
    phrase = HTTPStatus(status).phrase.lower()
    return GatewayError(status, phrase, "invalid_request_error", phrase.replace(" ", "_"))


def request_line(head_start: bytes) -> tuple[bytes, bytes, bool]:
    """(method, target, whole): `whole` is False when the target may go on past `head_start`."""
    line, newline, _ = head_start.partition(b"\n")
    method, _, rest = line.rstrip(b"\r").partition(b" ")
    target, space, _ = rest.partition(b" ")
    return method, target, bool(space or newline)


def names_openai_route(target: bytes, whole: bool) -> bool:
    """Whether `target` (origin- or absolute-form) routes to `/v1/*`, as the app would decide."""
    raw_path = target.partition(b"?")[0]
    if not raw_path.isascii():
        return False
    scope = origin_form({"raw_path": raw_path, "path": unquote(raw_path.decode())})
    if scope is None:
        return False
    path: str = scope["path"]
    return path.startswith("/v1/") or (whole and is_openai_path(path))


class FramingRefusalsH11Protocol(H11Protocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_start = b""
        self._head_of = -1
        """`keep_alive_requests` when `_head_start` was taken: the head of the request after
        that many (`_create_stream` counts each request once its head is parsed)."""

    async def handle(self, event: Event) -> None:
        if isinstance(event, RawData) and self.connection.their_state is h11.IDLE:
            if self._head_of != self.keep_alive_requests:  # the first read of a new head
                self._head_of = self.keep_alive_requests
                pending = self.connection.trailing_data[0]  # pipelined after the last request
                self._head_start = (pending + event.data[:HEAD_START])[:HEAD_START]
            elif len(self._head_start) < HEAD_START:
                self._head_start += event.data[: HEAD_START - len(self._head_start)]
        await super().handle(event)

    async def _create_stream(self, request: h11.Request) -> None:
        # The head is whole: a refusal of its body needs only its request line, and a request
        # held for minutes (a cold stream) keeps no more of it.
        line, newline, _ = self._head_start.partition(b"\n")
        self._head_start = line + newline
        await super()._create_stream(request)

    async def _send_error_response(self, status_code: int) -> None:
        method, target, whole = self._refused_request_line()
        content_type, body = refusal(status_code).body(names_openai_route(target, whole))
        if method == b"HEAD":
            body = b""
        headers = [
            (b"content-type", content_type),
            NOSNIFF,
            (b"content-length", b"%d" % len(body)),
            CLOSE,
            *self.config.response_headers("h11"),
        ]
        await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
        if body:
            await self._send_h11_event(h11.Data(data=body))
        await self._send_h11_event(h11.EndOfMessage())

    def _refused_request_line(self) -> tuple[bytes, bytes, bool]:
        """The request line of the head refused, or of the request whose body was; empty when
        its first bytes were not seen."""
        head_of = self.keep_alive_requests - (self.stream is not None)
        if head_of != self._head_of:
            return b"", b"", False
        return request_line(self._head_start)
