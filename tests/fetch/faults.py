"""Injectable HTTP faults, shared by the fake hub and the proxy in front of the real registry."""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import unquote


@dataclass
class Fault:
    """Break the next `times` requests whose target (path and query) contains `path`."""

    path: str
    kind: str
    """`status` (answer `status`), `cut` (close the connection halfway through the body),
    `reset` (the same with a TCP reset), `wrong-bytes`, or `slow`
    (send the body in `slow_chunks` pieces, `slow_delay` seconds apart)."""
    status: int = 503
    retry_after: str | None = None
    times: int = 1
    method: str = "GET"
    slow_chunks: int = 10
    slow_delay: float = 0.1


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""


@dataclass
class FaultPlan:
    """The faults a server still has to inject, and every request it received."""

    faults: list[Fault] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def receive(self, handler: BaseHTTPRequestHandler) -> Fault | None:
        """Record the request and take the first fault that matches it."""
        headers = {name.lower(): value for name, value in handler.headers.items()}
        target = unquote(handler.path)
        with self.lock:
            self.requests.append(Request(handler.command, handler.path, headers))
            for fault in self.faults:
                if fault.times > 0 and fault.method == handler.command and fault.path in target:
                    fault.times -= 1
                    return fault
        return None

    def downloads(self, name: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and r.path.endswith(name)]


def send_status(handler: BaseHTTPRequestHandler, fault: Fault) -> None:
    body = b'{"error": "injected"}'
    handler.send_response(fault.status)
    if fault.retry_after:
        handler.send_header("Retry-After", fault.retry_after)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


def send_body(handler: BaseHTTPRequestHandler, body: bytes, fault: Fault | None) -> None:
    """Write a response body (headers already sent), broken as `fault` says."""
    if fault is not None and fault.kind == "wrong-bytes":
        body = bytes(b ^ 0xFF for b in body)
    if fault is not None and fault.kind in ("reset", "cut"):
        handler.wfile.write(body[: len(body) // 2])
        handler.wfile.flush()
        time.sleep(0.3)  # let the client read the first half: a reset discards unsent bytes
        if fault.kind == "reset":
            linger = struct.pack("ii", 1, 0)
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)
        handler.connection.close()
        return
    if fault is not None and fault.kind == "slow":
        step = max(1, len(body) // fault.slow_chunks)
        for offset in range(0, len(body), step):
            handler.wfile.write(body[offset : offset + step])
            handler.wfile.flush()
            time.sleep(fault.slow_delay)
        return
    handler.wfile.write(body)
