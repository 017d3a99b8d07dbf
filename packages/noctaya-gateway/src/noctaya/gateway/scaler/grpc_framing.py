"""gRPC's length-prefixed messages on an HTTP/2 stream: the one request message of a call, read
with its size bounded before and after decompression, and response messages framed.

The 64 KiB bound only ever bites a misbehaving client (KEDA's requests are a few hundred bytes);
it caps what a flood of calls can make the scaler hold, and a compressed message is bounded by
what it inflates to, so a small gzip bomb is refused as soon as it passes the bound.
"""

from __future__ import annotations

import struct
import zlib

from noctaya.gateway.requests.responses import Receive
from noctaya.gateway.scaler.grpc_status import Code, RpcError

MAX_MESSAGE_BYTES = 64 * 1024
_PREFIX = struct.Struct(">BI")
_WBITS = {"gzip": 31, "deflate": 15}  # zlib's window bits for each grpc-encoding


class ClientGone(Exception):
    """The client left before its request was whole."""


class MalformedRequest(ValueError):
    """Bytes that do not frame one request message."""


def frame(message: bytes) -> bytes:
    return _PREFIX.pack(0, len(message)) + message


async def read_request(receive: Receive, encoding: str) -> bytes:
    """The call's one request message, decompressed. RpcError for a message over the bound or an
    encoding the scaler does not speak, MalformedRequest for anything else that is not exactly
    one message."""
    if encoding not in ("", "identity") and encoding not in _WBITS:
        raise RpcError(
            Code.UNIMPLEMENTED,
            f'grpc: Decompressor is not installed for grpc-encoding "{encoding}"',
        )
    body = bytearray()
    while True:
        event = await receive()
        if event["type"] != "http.request":
            raise ClientGone
        body += event.get("body", b"")
        if len(body) >= _PREFIX.size:
            declared = _PREFIX.unpack_from(body)[1]
            if declared > MAX_MESSAGE_BYTES:
                raise RpcError(
                    Code.RESOURCE_EXHAUSTED,
                    f"grpc: received message larger than max ({declared} vs. {MAX_MESSAGE_BYTES})",
                )
            if len(body) > _PREFIX.size + declared:
                raise MalformedRequest("more than one request message")
        if not event.get("more_body", False):
            break
    if len(body) < _PREFIX.size:
        raise MalformedRequest("no request message" if not body else "truncated message prefix")
    compressed, declared = _PREFIX.unpack_from(body)
    message = bytes(body[_PREFIX.size :])
    if len(message) < declared:
        raise MalformedRequest(f"message of {declared} bytes ended after {len(message)}")
    if compressed > 1:
        raise MalformedRequest(f"invalid compressed flag {compressed}")
    if not compressed:
        return message
    if encoding not in _WBITS:
        raise RpcError(Code.INTERNAL, "grpc: compressed flag set with identity or empty encoding")
    return _inflate(message, _WBITS[encoding], encoding)


def _inflate(message: bytes, wbits: int, encoding: str) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        inflated = inflater.decompress(message, MAX_MESSAGE_BYTES + 1)
    except zlib.error as error:
        raise MalformedRequest(f"invalid {encoding} data: {error}") from None
    if len(inflated) > MAX_MESSAGE_BYTES:
        raise RpcError(
            Code.RESOURCE_EXHAUSTED,
            f"grpc: received message after decompression larger than max ({MAX_MESSAGE_BYTES})",
        )
    if not inflater.eof or inflater.unused_data:
        raise MalformedRequest(f"invalid {encoding} data: not one whole stream")
    return inflated
