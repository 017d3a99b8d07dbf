"""Requests protobuf cannot parse end as INVALID_ARGUMENT, not as a servicer crash.

grpcio decodes a request before the servicer runs and treats a DecodeError there as the
servicer's failure: UNKNOWN to the client and a logged traceback per call, so any client could
fill the log with garbage bytes. The interceptor hands the servicer a `MalformedRequest` instead,
which it refuses like any other invalid request, with one log line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError


@dataclass(frozen=True)
class MalformedRequest:
    """Bytes that are not the method's request message; `reason` is protobuf's."""

    reason: str


class LenientDecoding(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self._handlers: dict[str, Any] = {}  # one per served method: the service's four

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        method: str = handler_call_details.method
        if method in self._handlers:
            return self._handlers[method]
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler  # unknown methods stay UNIMPLEMENTED, and are not cached
        lenient = handler._replace(request_deserializer=_lenient(handler.request_deserializer))
        self._handlers[method] = lenient
        return lenient


def _lenient(parse: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def deserialize(data: bytes) -> object:
        try:
            return parse(data)
        except DecodeError as exc:
            return MalformedRequest(str(exc))

    return deserialize
