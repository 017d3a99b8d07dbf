"""The core's `WorkloadOrchestrator` on one machine: each service's gateway, engine and
autoscaler as local processes, in place of the gateway Deployment, the backend Deployment with
the kubelet running its pod, and KEDA.

`apply` returns at once, as a write to the API server does: a service's processes start (or,
for a changed plan, replace the old ones) in the background, and `observe` says how far they
got. Services are independent: each claims its own ports, and one failing leaves the others
running. What they share is the `Machine`: the device budget their engines take turns on, the
traffic local mode's endpoint counts for them, and the folder of their logs.

A service stops in this order: the autoscaler first, so the engine is not scaled away while the
gateway drains its in-flight requests into it; then the gateway drains and exits; then the
engine stops. Every child runs in its own process group and is stopped through it, so nothing
outlives local mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import socket
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from noctaya.core.observation import (
    BACKEND,
    GATEWAY,
    DeploymentFacts,
    PodFacts,
    ServiceObservation,
    observe_tier,
)
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.local import log_lines
from noctaya.local.activity import active_states, scaled_object_ref
from noctaya.local.autoscaler import autoscale
from noctaya.local.command import find_executable
from noctaya.local.devices import MachineDevices
from noctaya.local.engine import EngineReplica
from noctaya.local.engine_logs import EngineLogs
from noctaya.local.errors import LocalRunError, one_line
from noctaya.local.gateway_env import gateway_env
from noctaya.local.paced_starts import StartTurns
from noctaya.local.plan import GATEWAY_COMMAND, LOOPBACK, LocalPlan
from noctaya.local.port_claims import PortClaims, PortUse, engine_use
from noctaya.local.processes import ManagedProcess, describe_exit
from noctaya.local.swaps import DeviceBudget, Tenant
from noctaya.local.traffic import TrafficBoard

log = logging.getLogger("noctaya.local")
GATEWAY_START_TIMEOUT = 30.0
GATEWAY_STOP_GRACE = 25.0
"""The gateway's own drain budget (20 s) and a margin; after that it is killed."""
_HTTP_LINE = re.compile(r"Noctaya gateway version \S+ listening on (\S+), backend ")
_SCALER_LINE = re.compile(r"Noctaya external scaler listening on (\S+)$")


@dataclass(frozen=True, slots=True)
class LocalService:
    """One service as this machine runs it."""

    plan: LocalPlan
    listen_addr: str
    """Where its gateway listens (port 0: a port the kernel picks)."""
    source: str = field(compare=False)
    """The file it came from, named in the port claims other local modes read; a service whose
    file was renamed is the same service, so its processes go on."""
    endpoint: str = ""
    """Where its clients reach it (local mode's endpoint), for the log; "": the gateway."""


@dataclass(frozen=True)
class Machine:
    """What the services of one local mode share."""

    devices: MachineDevices | None = None
    """The device pools; None: no device is budgeted."""
    budget: DeviceBudget = field(default_factory=DeviceBudget)
    traffic: TrafficBoard = field(default_factory=TrafficBoard)
    logs: EngineLogs | None = None
    """Where each service's gateway and engine output is kept; None: the terminal only."""
    on_change: Callable[[], None] = lambda: None
    """Hears every change of a service's processes (the status table, held clients)."""
    gateway_starts: StartTurns = field(default_factory=StartTurns)
    """Turns the gateways take to start, a few at a time."""


Translate = Callable[[ServingPlan], LocalService]
"""How a serving plan maps onto this machine; raises LocalConfigError for what it cannot run."""


class LocalWorkloads:
    """The services of one local mode, by identity: local mode's `WorkloadOrchestrator`.

    `remove` returns at once, as deleting a Deployment does: the processes drain and stop on
    their own, and a service applied again meanwhile starts once they are gone (its ports are
    theirs until then). `close` waits for every service, removed ones included.
    """

    def __init__(
        self, translate: Translate, environ: Mapping[str, str], machine: Machine | None = None
    ) -> None:
        self._translate = translate
        self._environ = environ
        self.machine = machine or Machine()
        self._services: dict[ServiceIdentity, ServiceProcesses] = {}
        self._stopping: dict[ServiceIdentity, ServiceProcesses] = {}

    def apply(self, plan: ServingPlan) -> None:
        """Start the service's processes, or replace them if its plan changed or they ended;
        must be called on the event loop that runs them."""
        wanted = self._translate(plan)
        running = self._services.get(plan.service)
        if running is not None and running.wanted == wanted and not running.ended.done():
            return
        replaces = running or self._stopping.pop(plan.service, None)
        self._services[plan.service] = ServiceProcesses(
            wanted, self._environ, self.machine, replaces=replaces
        )

    def observe(self, plan: ServingPlan) -> ServiceObservation:
        processes = self._services.get(plan.service)
        if processes is None:
            nothing = DeploymentFacts()
            return ServiceObservation(
                observe_tier(BACKEND, nothing, []), observe_tier(GATEWAY, nothing, [])
            )
        return processes.observe()

    def processes(self, service: ServiceIdentity) -> ServiceProcesses:
        return self._services[service]

    def remove(self, service: ServiceIdentity) -> None:
        """Begin stopping the service's processes and forget it."""
        processes = self._services.pop(service, None)
        if processes is None:
            return
        processes.begin_stop()
        self._stopping[service] = processes

        def gone(_: object) -> None:
            if self._stopping.get(service) is processes:
                del self._stopping[service]

        processes.ended.add_done_callback(gone)

    async def close(self) -> None:
        """Stop every service (in parallel: each drains on its own)."""
        services = [*self._services.values(), *self._stopping.values()]
        self._services = {}
        await asyncio.gather(*(processes.stop() for processes in services))


class ServiceProcesses:
    """One service's gateway, engine and autoscaler, from start to stop.

    `serving` resolves to the gateway's client URL once it serves (it is cancelled if the
    service stops first). `ended` completes when the processes are stopped: by `stop()`, or
    with the LocalRunError (logged) of a process that failed on its own.
    """

    def __init__(
        self,
        wanted: LocalService,
        environ: Mapping[str, str],
        machine: Machine,
        *,
        replaces: ServiceProcesses | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        self.wanted = wanted
        self._machine = machine
        name = wanted.plan.service_name
        self._log = machine.logs.writer(name) if machine.logs is not None else None
        self.engine = EngineReplica(
            wanted.plan.engine,
            environ,
            service=name,
            devices=_tenant(wanted.plan, machine),
            on_line=self._log.engine if self._log is not None else None,
            on_change=machine.on_change,
        )
        self.gateway: ManagedProcess | None = None
        self.serving: asyncio.Future[str] = loop.create_future()
        self._environ = environ
        self._stop = asyncio.Event()
        self.ended = loop.create_task(self._lifetime(replaces))

    def observe(self) -> ServiceObservation:
        """The engine and the gateway as their Deployments and Pods would report them."""
        name = self.wanted.plan.service_name
        return ServiceObservation(
            backend=observe_tier(BACKEND, *self.engine.facts(f"{name}-engine")),
            gateway=observe_tier(GATEWAY, *self._gateway_facts(f"{name}-gateway")),
        )

    def _gateway_facts(self, name: str) -> tuple[DeploymentFacts, list[PodFacts]]:
        if self.ended.done():
            return DeploymentFacts(), []
        if self.gateway is None:
            return DeploymentFacts(replicas=1), []
        alive = self.gateway.returncode is None
        serving = alive and self.serving.done() and not self.serving.cancelled()
        pod = PodFacts(
            name=name,
            phase="Running" if alive else "Failed",
            running=alive,
            ready=serving,
        )
        return DeploymentFacts(1, ready_replicas=int(serving), available_replicas=int(serving)), [
            pod
        ]

    def begin_stop(self) -> None:
        """Stop in order (autoscaler, gateway, engine), without waiting."""
        self._stop.set()

    async def stop(self) -> None:
        """Stop in order (autoscaler, gateway, engine) and wait until everything is gone."""
        self.begin_stop()
        with contextlib.suppress(LocalRunError):
            await asyncio.shield(self.ended)

    async def _lifetime(self, replaces: ServiceProcesses | None) -> None:
        if replaces is not None:
            await replaces.stop()
        claims = PortClaims()
        scaling: asyncio.Task[None] | None = None
        try:
            gateway_argv = _gateway_argv()
            self._claim_ports(claims)
            _check_engine_port_free(self.wanted.plan.engine.port)
            turns = self._machine.gateway_starts
            if not await turns.take(self._stop):
                return
            try:
                addresses = _Addresses()
                self.gateway = await ManagedProcess.start(
                    f"{self.wanted.plan.service_name} gateway",
                    gateway_argv,
                    self._gateway_environ(),
                    self._gateway_line(addresses),
                )
                log.info(log_lines.GATEWAY_STARTED, self.wanted.plan.service_name, self.gateway.pid)
                started = await self._until_stopped(addresses.both(), GATEWAY_START_TIMEOUT)
            finally:
                turns.give_back()
            if started is None:
                return
            http_addr, scaler_addr = started
            self.serving.set_result(f"http://{client_host_port(http_addr)}/v1")
            self._machine.on_change()
            self._log_serving()
            scaling = asyncio.get_running_loop().create_task(self._autoscale(scaler_addr))
            await self._serve(scaling)
        except LocalRunError as error:
            log.error("%s", one_line(str(error)))  # before the shutdown lines, where it happened
            raise
        finally:
            self.serving.cancel()  # nothing if it resolved
            if scaling is not None:
                scaling.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await scaling
            if self.gateway is not None:
                await self.gateway.stop(GATEWAY_STOP_GRACE)
            await self.engine.scale(0)
            claims.release()
            if self._log is not None:
                self._log.close()
            self._machine.on_change()

    def _claim_ports(self, claims: PortClaims) -> None:
        plan, listen = self.wanted.plan, self.wanted.listen_addr

        def use(what: str) -> PortUse:
            return PortUse(plan.service_name, what, os.getpid(), self.wanted.source)

        claims.claim(plan.engine.port, use(engine_use(plan)))
        _, gateway_port = parse_listen_address(listen)
        if gateway_port:  # port 0: the kernel picks a port nobody is using
            claims.claim(gateway_port, use(f"gateway port (--listen {listen})"))

    def _gateway_line(self, addresses: _Addresses) -> Callable[[str], None]:
        if self._log is None:
            return addresses.observe
        to_file = self._log.gateway

        def observe(line: str) -> None:
            addresses.observe(line)
            to_file(line)

        return observe

    def _gateway_environ(self) -> dict[str, str]:
        """Our environment without stray NOCTAYA_* settings, plus the service's gateway settings."""
        inherited = {
            name: value for name, value in self._environ.items() if not name.startswith("NOCTAYA_")
        }
        return {**inherited, **gateway_env(self.wanted.plan, self.wanted.listen_addr)}

    def _log_serving(self) -> None:
        plan = self.wanted.plan
        log.info(
            log_lines.SERVING,
            plan.service_name,
            self.wanted.endpoint or self.serving.result(),
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

    async def _autoscale(self, scaler_addr: str) -> None:
        plan = self.wanted.plan
        service = plan.serving.service
        ref = scaled_object_ref(
            service.name, service.namespace, scaler_addr, plan.autoscaling.target
        )
        await autoscale(
            active_states(scaler_addr, ref), self.engine, plan.autoscaling, plan.service_name
        )

    async def _until_stopped(
        self, startup: Coroutine[Any, Any, tuple[str, str]], limit: float
    ) -> tuple[str, str] | None:
        """The gateway's addresses; None if asked to stop first; LocalRunError if it fails first."""
        assert self.gateway is not None
        ready = asyncio.ensure_future(startup)
        exited = asyncio.ensure_future(self.gateway.wait())
        stopped = asyncio.ensure_future(self._stop.wait())
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
        if self._stop.is_set():
            return None
        if self.gateway.returncode is not None:
            raise LocalRunError(
                f"the gateway exited during startup ({describe_exit(self.gateway.returncode)}); "
                "its log is above"
            )
        raise LocalRunError(f"the gateway did not report its addresses within {limit:g}s")

    async def _serve(self, scaling: asyncio.Task[None]) -> None:
        """Until asked to stop; LocalRunError when the gateway or the autoscaler ends first."""
        assert self.gateway is not None
        exited = asyncio.ensure_future(self.gateway.wait())
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({exited, scaling, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
            stopped.cancel()
        if self._stop.is_set():
            return
        if self.gateway.returncode is not None:
            exit_text = describe_exit(self.gateway.returncode)
            raise LocalRunError(f"the gateway exited unexpectedly ({exit_text})")
        error = scaling.exception() if scaling.done() else None
        raise LocalRunError(f"the autoscaler stopped: {error}")


class _Addresses:
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


def _tenant(plan: LocalPlan, machine: Machine) -> Tenant | None:
    """The service's share of the device budget; None when its vendor's devices are not
    budgeted."""
    pool = machine.devices.pool(plan.devices.vendor) if machine.devices is not None else None
    if pool is None or plan.devices.count == 0:
        return None
    return machine.budget.tenant(
        plan.service_name,
        plan.model_names[0],
        pool,
        plan.devices.count,
        pinned=plan.pinned,
        traffic=machine.traffic.of(plan.service_name),
        activation_timeout=plan.gateway.activation_timeout.seconds,
    )


def _gateway_argv() -> list[str]:
    executable = find_executable(GATEWAY_COMMAND)
    if executable is None:
        raise LocalRunError(f"{GATEWAY_COMMAND} not found; install the noctaya-gateway package")
    return [executable]


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


def client_host_port(listen_addr: str) -> str:
    """Where a local client reaches a listen address (all interfaces → loopback)."""
    host, port = parse_listen_address(listen_addr)
    if host in ("", "0.0.0.0"):
        host = LOOPBACK
    elif host == "::":
        host = "::1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
