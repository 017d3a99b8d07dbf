"""The engine's readiness check, run as the kubelet runs a readiness probe: the runtime's own
check (`spec.health.readiness`, else `GET /health` on the serving port) with its timing.

An HTTP check passes on a status from 200 to 399, a TCP check when the connection opens. A
missing timing field takes the Kubernetes default. The engine is ready after `successThreshold`
passes in a row and no longer ready after `failureThreshold` failures in a row; it starts out
not ready.

Until the engine is first ready, the check runs every `LOADING_PERIOD` at most rather than its
period (10 s by default), as a startup probe would: the moment a model is ready is when a swap
ends, its minimum residency begins and the status table says so, which a period meant for
noticing failures would report up to ten seconds late.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable

from noctaya.core.plan.container import HealthCheck, HttpGet

LOOPBACK = "127.0.0.1"
DEFAULT_PERIOD, DEFAULT_TIMEOUT = 10, 1
DEFAULT_SUCCESS, DEFAULT_FAILURE = 1, 3
LOADING_PERIOD = 0.05
_STATUS_LINE_LIMIT = 4096


class PortNames:
    """Resolves a check's port: a number, or the serving container's port name."""

    def __init__(self, name: str, number: int) -> None:
        self._name, self._number = name, number

    def number(self, port: int | str) -> int:
        if isinstance(port, int):
            return port
        if port == self._name:
            return self._number
        if port.isdigit():
            return int(port)
        raise ValueError(f"port {port!r} names no port of the serving container")


async def watch_readiness(
    check: HealthCheck, ports: PortNames, report: Callable[[bool], None]
) -> None:
    """Run `check` until cancelled, calling `report` with each change of readiness."""
    period = check.period_seconds or DEFAULT_PERIOD
    successes_needed = check.success_threshold or DEFAULT_SUCCESS
    failures_allowed = check.failure_threshold or DEFAULT_FAILURE
    ready, successes, failures = False, 0, 0
    ever_ready = False
    await asyncio.sleep(check.initial_delay_seconds or 0)
    while True:
        if await passes(check, ports):
            successes, failures = successes + 1, 0
        else:
            successes, failures = 0, failures + 1
        now_ready = successes >= successes_needed or (ready and failures < failures_allowed)
        if now_ready != ready:
            ready = now_ready
            ever_ready = ever_ready or ready
            report(ready)
        await asyncio.sleep(period if ever_ready else min(period, LOADING_PERIOD))


async def passes(check: HealthCheck, ports: PortNames) -> bool:
    """One attempt of `check` within its timeout."""
    try:
        async with asyncio.timeout(check.timeout_seconds or DEFAULT_TIMEOUT):
            if check.http_get is not None:
                return await _http_get(check.http_get, ports)
            if check.tcp_socket is not None:
                host = check.tcp_socket.host or LOOPBACK
                _, writer = await asyncio.open_connection(host, ports.number(check.tcp_socket.port))
                await _close(writer)
                return True
    except (OSError, TimeoutError, ValueError):
        return False
    return False


async def _http_get(action: HttpGet, ports: PortNames) -> bool:
    host = action.host or LOOPBACK
    secure = (action.scheme or "HTTP").upper() == "HTTPS"
    context = _unverified() if secure else None  # the kubelet does not verify either
    reader, writer = await asyncio.open_connection(host, ports.number(action.port), ssl=context)
    try:
        headers = "".join(f"{name}: {value}\r\n" for name, value in action.headers)
        if not any(name.lower() == "host" for name, _ in action.headers):
            headers = f"Host: {host}\r\n{headers}"
        request = f"GET {action.path or '/'} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"
        writer.write(request.encode("latin-1"))
        await writer.drain()
        status_line = await reader.readuntil(b"\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return False
    finally:
        await _close(writer)
    parts = status_line[:_STATUS_LINE_LIMIT].split()
    return len(parts) >= 2 and parts[1].isdigit() and 200 <= int(parts[1]) < 400


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
