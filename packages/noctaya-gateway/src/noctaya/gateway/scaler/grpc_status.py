"""gRPC status codes and the trailers that carry them, in the form KEDA's gRPC client reads."""

from __future__ import annotations

from enum import IntEnum


class Code(IntEnum):
    OK = 0
    INVALID_ARGUMENT = 3
    RESOURCE_EXHAUSTED = 8
    UNIMPLEMENTED = 12
    INTERNAL = 13


class RpcError(Exception):
    """Ends the RPC with `code` and `message` in its trailers."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status_trailers(code: Code, message: str = "") -> list[tuple[bytes, bytes]]:
    trailers = [(b"grpc-status", b"%d" % code)]
    if message:
        trailers.append((b"grpc-message", _percent_encoded(message)))
    return trailers


def _percent_encoded(message: str) -> bytes:
    """gRPC's encoding of grpc-message: UTF-8, with `%` and bytes outside printable ASCII as
    %XX (a header value could not carry them)."""
    return b"".join(
        b"%%%02X" % byte if byte < 0x20 or byte > 0x7E or byte == 0x25 else bytes((byte,))
        for byte in message.encode("utf-8")
    )
