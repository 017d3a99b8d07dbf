"""The ExternalScaler's four RPCs as an ASGI app: gRPC over hypercorn's HTTP/2.

Every call gets gRPC's answer shape (headers, the reply message, `grpc-status` trailers), so KEDA
reads each refusal as a status with a message, never as a broken stream. A request that is not
gRPC at all (HTTP/1.1, another method or content type) gets the HTTP status gRPC prescribes.
Undecodable request bytes end the call with INVALID_ARGUMENT and cost one log line, so no client
can fill the log with tracebacks.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from noctaya.gateway.requests.lifespan import serve_lifespan
from noctaya.gateway.requests.responses import Receive, Send
from noctaya.gateway.scaler.grpc_framing import ClientGone, MalformedRequest, frame, read_request
from noctaya.gateway.scaler.grpc_status import Code, RpcError, status_trailers
from noctaya.gateway.scaler.messages import decode_get_metrics_request, decode_scaled_object_ref
from noctaya.gateway.scaler.metadata import ScalerRequestError
from noctaya.gateway.scaler.protobuf_wire import WireError
from noctaya.gateway.scaler.service import ActiveStream, ExternalScalerService
from noctaya.gateway.server.patches.receive_queue import ReceiveQueue

SERVICE = "externalscaler.ExternalScaler"
MAX_CONCURRENT_CALLS = 1024
"""Streams are held to `MAX_ACTIVE_STREAMS` by the service, far below, so unary calls always find
room; this caps only what a flood of calls can make the scaler hold."""

_log = logging.getLogger(__name__)
_RESPONSE_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/grpc")],
    "trailers": True,
}
_GRPC_SUBTYPES = (b"application/grpc+", b"application/grpc;")  # `+proto`, `; charset=...`
_NOT_GRPC_HEADERS = [(b"content-type", b"text/plain; charset=utf-8")]

Decode = Callable[[bytes], Any]


class ScalerApp:
    def __init__(self, service: ExternalScalerService) -> None:
        self._service = service
        self._unary: dict[str, tuple[Decode, Callable[[Any], Awaitable[bytes]]]] = {
            f"/{SERVICE}/IsActive": (decode_scaled_object_ref, service.is_active),
            f"/{SERVICE}/GetMetricSpec": (decode_scaled_object_ref, service.get_metric_spec),
            f"/{SERVICE}/GetMetrics": (decode_get_metrics_request, service.get_metrics),
        }
        self._stream_path = f"/{SERVICE}/StreamIsActive"
        self._calls = 0

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send)
        elif scope["type"] == "http":
            refusal = _not_grpc(scope)
            if refusal is not None:
                await _plain_answer(send, *refusal)
                return
            self._calls += 1
            try:
                stream = await self._call(scope, receive, send)
            except RpcError as error:
                await _answer(send, b"", error.code, error.message)
                return
            except ClientGone:
                return
            finally:
                self._calls -= 1
            if stream is not None:
                await _serve(stream, receive, send)

    async def _call(
        self, scope: dict[str, Any], receive: Receive, send: Send
    ) -> ActiveStream | None:
        """Answer a unary call; open a stream call's stream (the service caps those, so from
        then on it no longer counts against MAX_CONCURRENT_CALLS)."""
        if self._calls > MAX_CONCURRENT_CALLS:
            raise RpcError(Code.RESOURCE_EXHAUSTED, "too many concurrent calls")
        path: str = scope["path"]
        unary = self._unary.get(path)
        if unary is None and path != self._stream_path:
            raise RpcError(Code.UNIMPLEMENTED, _unknown_method(path))
        decode = unary[0] if unary is not None else decode_scaled_object_ref
        request = await _request(scope, receive, decode)
        try:
            if unary is None:
                return self._service.open_stream(request)
            reply = await unary[1](request)
        except ScalerRequestError as error:
            raise RpcError(Code.INVALID_ARGUMENT, str(error)) from None
        await _answer(send, frame(reply))
        return None


async def _serve(stream: ActiveStream, receive: Receive, send: Send) -> None:
    """Until the stream ends: the client leaves, or the service ends it."""
    try:
        assert isinstance(receive, ReceiveQueue), "served by the gateway's hypercorn"
        receive.on_disconnect(stream.end)
        await send(_RESPONSE_START)
        async for message in stream:
            body = frame(message)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await _finish(send, b"", Code.OK)
    finally:
        stream.close()


async def _request(scope: dict[str, Any], receive: Receive, decode: Decode) -> Any:
    """The call's decoded request; undecodable bytes are INVALID_ARGUMENT with one log line."""
    encoding = ""
    for name, value in scope["headers"]:
        if name == b"grpc-encoding":
            encoding = value.decode("latin-1").strip()
    try:
        return decode(await read_request(receive, encoding))
    except (MalformedRequest, WireError) as error:
        client = scope.get("client") or ("unknown", 0)
        _log.warning("refused a malformed scaler request from %s:%s: %s", *client[:2], error)
        raise RpcError(Code.INVALID_ARGUMENT, f"malformed request: {error}") from None


async def _answer(send: Send, body: bytes, code: Code = Code.OK, message: str = "") -> None:
    await send(_RESPONSE_START)
    await _finish(send, body, code, message)


async def _finish(send: Send, body: bytes, code: Code, message: str = "") -> None:
    await send({"type": "http.response.body", "body": body, "more_body": False})
    await send({"type": "http.response.trailers", "headers": status_trailers(code, message)})


def _not_grpc(scope: dict[str, Any]) -> tuple[int, str] | None:
    """The HTTP status and text for a request that is not a gRPC call, as gRPC servers answer."""
    if scope["http_version"] != "2":
        return 505, "gRPC requires HTTP/2"
    if scope["method"] != "POST":
        return 405, "gRPC requires POST"
    content_type = b""
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value
    if content_type != b"application/grpc" and not content_type.startswith(_GRPC_SUBTYPES):
        shown = content_type.decode("latin-1")
        return 415, f'invalid gRPC request content-type "{shown}"'
    return None


async def _plain_answer(send: Send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _NOT_GRPC_HEADERS})
    await send({"type": "http.response.body", "body": f"{text}\n".encode()})


def _unknown_method(path: str) -> str:
    service, _, method = path.lstrip("/").rpartition("/")
    if service != SERVICE:
        return f"unknown service {service or path}"
    return f"unknown method {method} for service {service}"
