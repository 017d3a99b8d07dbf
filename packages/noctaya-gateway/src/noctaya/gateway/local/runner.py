"""One local service, start to stop: the gateway process, the autoscaler, and a clean shutdown.

Shutdown order (on SIGINT/SIGTERM, or when the gateway dies): the autoscaler stops first, so
the engine is not scaled away while the gateway drains its in-flight requests into it; then the
gateway drains and exits; then the engine stops. Every child runs in its own process group and
is stopped through it, so nothing outlives `noctaya-local`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import signal
import socket
from collections.abc import Coroutine, Mapping
from typing import Any

from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.local import log_lines
from noctaya.gateway.local.activity import active_states, scaled_object_ref
from noctaya.gateway.local.autoscaler import autoscale
from noctaya.gateway.local.command import find_executable
from noctaya.gateway.local.engine import EngineReplica
from noctaya.gateway.local.errors import LocalRunError
from noctaya.gateway.local.gateway_env import gateway_env
from noctaya.gateway.local.plan import DEFAULT_NAMESPACE, GATEWAY_COMMAND, LOOPBACK, LocalPlan
from noctaya.gateway.local.port_claims import PortClaims, PortUse, engine_use
from noctaya.gateway.local.processes import ManagedProcess, describe_exit

log = logging.getLogger("noctaya.local")
GATEWAY_START_TIMEOUT = 30.0
GATEWAY_STOP_GRACE = 25.0
"""The gateway's own drain budget (20 s) and a margin; after that it is killed."""
_HTTP_LINE = re.compile(r"Noctaya gateway version \S+ listening on (\S+), backend ")
_SCALER_LINE = re.compile(r"Noctaya external scaler listening on (\S+)$")


class _GatewayAddresses:
    """The bound addresses, read from the gateway's startup log lines."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.http: asyncio.Future[str] = loop.create_future()
        self.scaler: asyncio.Future[str] = loop.create_future()

    def observe(self, line: str) -> None:
        for pattern, future in ((_HTTP_LINE, self.http), (_SCALER_LINE, self.scaler)):
            match = pattern.search(line)
            if match and not future.done():
                future.set_result(match.group(1))

    async def both(self) -> tuple[str, str]:
        return await self.http, await self.scaler


async def run_local(
    plan: LocalPlan, listen_addr: str, environ: Mapping[str, str], *, source: str
) -> int:
    """Serve until SIGINT/SIGTERM (exit code 0) or a failure (exit code 1, logged).

    Raises LocalRunError only for what is found wrong before anything starts: a missing
    gateway command, or a port another service (or another program) already uses. `source`
    names the file in the port claims other local modes read.
    """
    gateway_argv = _gateway_argv()
    claims = PortClaims()
    try:
        _claim_ports(claims, plan, listen_addr, source)
        _check_engine_port_free(plan.engine.port)
        return await _run(plan, gateway_argv, listen_addr, environ)
    finally:
        claims.release()


def _claim_ports(claims: PortClaims, plan: LocalPlan, listen_addr: str, source: str) -> None:
    def use(what: str) -> PortUse:
        return PortUse(plan.service_name, what, os.getpid(), source)

    claims.claim(plan.engine.port, use(engine_use(plan)))
    _, gateway_port = parse_listen_address(listen_addr)
    if gateway_port:  # port 0: the kernel picks a port nobody is using
        claims.claim(gateway_port, use(f"gateway port (--listen {listen_addr})"))


async def _run(
    plan: LocalPlan, gateway_argv: list[str], listen_addr: str, environ: Mapping[str, str]
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    replica = EngineReplica(plan.engine, environ)
    gateway: ManagedProcess | None = None
    scaling: asyncio.Task[None] | None = None
    try:
        addresses = _GatewayAddresses()
        gateway = await ManagedProcess.start(
            "gateway", gateway_argv, _gateway_environ(plan, listen_addr, environ), addresses.observe
        )
        log.info(log_lines.GATEWAY_STARTED, gateway.pid)
        started = await _first(addresses.both(), gateway, stop, GATEWAY_START_TIMEOUT)
        if started is None:
            return 0
        http_addr, scaler_addr = started
        log.info(
            log_lines.SERVING,
            plan.service_name,
            f"http://{_client_host_port(http_addr)}/v1",
            plan.runtime_name,
            plan.backend_url.removeprefix("http://"),
            "kept at 1" if plan.autoscaling.min_replicas > 0 else "scaled to zero",
        )
        if plan.autoscaling.max_replicas > 1:
            log.info(
                "scaling.max is %d: one machine runs one engine at most; a cluster scales to %d",
                plan.autoscaling.max_replicas,
                plan.autoscaling.max_replicas,
            )
        ref = scaled_object_ref(
            plan.service_name, DEFAULT_NAMESPACE, scaler_addr, plan.autoscaling.target
        )
        scaling = loop.create_task(
            autoscale(active_states(scaler_addr, ref), replica, plan.autoscaling)
        )
        return await _serve(gateway, scaling, stop)
    except LocalRunError as error:
        log.error("%s", error)  # before the shutdown lines, where it happened
        return 1
    finally:
        if scaling is not None:
            scaling.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await scaling
        if gateway is not None:
            await gateway.stop(GATEWAY_STOP_GRACE)
        await replica.scale(0)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info(log_lines.STOPPED)


async def _serve(gateway: ManagedProcess, scaling: asyncio.Task[None], stop: asyncio.Event) -> int:
    exited = asyncio.ensure_future(gateway.wait())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({exited, scaling, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        exited.cancel()
        stopped.cancel()
    if stop.is_set():
        log.info("shutting down")
        return 0
    if gateway.returncode is not None:
        exit_text = describe_exit(gateway.returncode)
        raise LocalRunError(f"the gateway exited unexpectedly ({exit_text})")
    error = scaling.exception() if scaling.done() else None
    raise LocalRunError(f"the autoscaler stopped: {error}")


async def _first(
    startup: Coroutine[Any, Any, tuple[str, str]],
    gateway: ManagedProcess,
    stop: asyncio.Event,
    limit: float,
) -> tuple[str, str] | None:
    """The gateway's addresses; None if asked to stop first; LocalRunError if it fails first."""
    ready = asyncio.ensure_future(startup)
    exited = asyncio.ensure_future(gateway.wait())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait(
            {ready, exited, stopped}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        for waiter in (exited, stopped):
            waiter.cancel()
    if ready.done():
        return ready.result()
    ready.cancel()
    if stop.is_set():
        return None
    if gateway.returncode is not None:
        raise LocalRunError(
            f"the gateway exited during startup ({describe_exit(gateway.returncode)}); "
            "its log is above"
        )
    raise LocalRunError(f"the gateway did not report its addresses within {limit:g}s")


def _gateway_argv() -> list[str]:
    executable = find_executable(GATEWAY_COMMAND)
    if executable is None:
        raise LocalRunError(f"{GATEWAY_COMMAND} not found; install the noctaya-gateway package")
    return [executable]


def _gateway_environ(
    plan: LocalPlan, listen_addr: str, environ: Mapping[str, str]
) -> dict[str, str]:
    """Our environment without stray NOCTAYA_* settings, plus the service's gateway settings."""
    inherited = {name: value for name, value in environ.items() if not name.startswith("NOCTAYA_")}
    return {**inherited, **gateway_env(plan, listen_addr)}


def _check_engine_port_free(port: int) -> None:
    """Another server on the engine's port would silently receive the gateway's traffic."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((LOOPBACK, port))
    except OSError as error:
        in_use = error.errno == errno.EADDRINUSE
        reason = "is already in use" if in_use else f"cannot be used: {error}"
        raise LocalRunError(
            f"engine port {port} (InferenceRuntime spec.container.port.containerPort) on "
            f"{LOOPBACK} {reason}"
        ) from None
    finally:
        probe.close()


def _client_host_port(listen_addr: str) -> str:
    """Where a local client reaches a listen address (all interfaces → loopback)."""
    host, port = parse_listen_address(listen_addr)
    if host in ("", "0.0.0.0"):
        host = LOOPBACK
    elif host == "::":
        host = "::1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
