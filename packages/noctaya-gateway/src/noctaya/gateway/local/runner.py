"""One run of `noctaya-local`: the endpoint, the services of the files (applied to the local
workloads), their files watched, until SIGINT/SIGTERM; then everything stopped.

Start-up fails fast: if a service cannot start (a port in use, a gateway that does not come
up), local mode stops everything and exits 1. Once serving, a service whose gateway fails is
started again after a back-off (1 s doubling to 30 s), as a Deployment replaces a pod, while
the others serve on; so is a service a live edit added that cannot start yet.

A live edit applies to the services it touches only: an added service starts, a changed one
drains and restarts, a removed one drains and stops; the others' requests go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.values.listen_address import parse_listen_address
from noctaya.gateway.addresses import with_port
from noctaya.gateway.config import GatewayConfig
from noctaya.gateway.listen_socket import listen_socket, serve_on
from noctaya.gateway.local import console, log_lines
from noctaya.gateway.local.admission import AdmissionSettings, Admitted, admit
from noctaya.gateway.local.engine_logs import EngineLogs
from noctaya.gateway.local.errors import LocalConfigError, LocalRunError, one_line
from noctaya.gateway.local.live_files import WATCH_INTERVAL, FileChange, ServedFiles
from noctaya.gateway.local.local_metrics import ServiceCounts, local_series, merge_expositions
from noctaya.gateway.local.model_fetch import fetch_model
from noctaya.gateway.local.port_claims import (
    PortClaims,
    PortUse,
    endpoint_use,
    own_endpoint_use,
)
from noctaya.gateway.local.router import LocalEndpoint
from noctaya.gateway.local.routes import Route, RouteTable
from noctaya.gateway.local.service_view import view
from noctaya.gateway.local.sources import LocalManifests
from noctaya.gateway.local.status_table import render_table
from noctaya.gateway.local.swaps import DeviceBudget
from noctaya.gateway.local.traffic import TrafficBoard
from noctaya.gateway.local.workloads import (
    LocalService,
    LocalWorkloads,
    Machine,
    client_host_port,
)
from noctaya.gateway.server import hypercorn_config
from noctaya.gateway.server_patches import install_server_patches
from noctaya.gateway.tested_versions import UntestedServerLibrary
from noctaya.gateway.upstream import UpstreamError

log = logging.getLogger("noctaya.local")
GATEWAY_LISTEN = "127.0.0.1:0"
"""Each gateway listens privately; clients come through local mode's endpoints."""
FIRST_RESTART, MAX_RESTART = 1.0, 30.0
HEALTHY_SERVING = 10.0
"""A service serving this long after a restart starts again at the first back-off."""
METRICS_TIMEOUT = 2.0


@dataclass
class _Restart:
    delay: float = FIRST_RESTART
    due: float | None = None
    applied_at: float = 0.0


@dataclass(frozen=True)
class RunOptions:
    admission: AdmissionSettings
    logs: Path
    cache: Path
    min_residency: float


class _Endpoint:
    """One listening endpoint (the shared one, or a service's own) served by hypercorn."""

    def __init__(self, app: LocalEndpoint, listen: str) -> None:
        self.app = app
        self.listen = listen
        self.url = ""
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        try:
            sock = listen_socket(self.listen)
        except OSError as error:
            raise LocalRunError(str(error)) from None
        bound = with_port(self.listen, sock.getsockname()[1])
        self.url = f"http://{client_host_port(bound)}/v1"
        config = hypercorn_config(GatewayConfig(backend_url="http://127.0.0.1"))
        self._task = serve_on(sock, self.app, config, self._stop.wait)

    def begin_stop(self) -> None:
        self._stop.set()

    async def stopped(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task


class LocalMode:
    def __init__(self, files: ServedFiles, options: RunOptions, environ: Mapping[str, str]):
        self._files = files
        self._options = options
        self._environ = environ
        self.budget = DeviceBudget(options.min_residency)
        self.traffic = TrafficBoard()
        self.traffic.listen(self.budget.changed)
        self.machine = Machine(
            options.admission.devices,
            self.budget,
            self.traffic,
            EngineLogs(options.logs),
            self._changed,
        )
        self.budget.listen(self._changed)
        self.workloads = LocalWorkloads(self._translate, environ, self.machine)
        self.routes = RouteTable()
        self._admitted = Admitted({}, {})
        self._fetched: dict[str, str] = {}
        self._identities: dict[str, ServiceIdentity] = {}
        self._claims = PortClaims()
        api_key_file = options.admission.api_key_file
        self._endpoint = _Endpoint(
            LocalEndpoint(self.routes, self.metrics, api_key_file=api_key_file),
            options.admission.listen,
        )
        self._own: dict[str, tuple[_Endpoint, PortClaims]] = {}
        self._restarts: dict[str, _Restart] = {}
        self._removing: set[asyncio.Task[None]] = set()
        self._refresh: asyncio.Handle | None = None
        self.stop = asyncio.Event()

    # --- what the services' processes are made of

    def _translate(self, serving: ServingPlan) -> LocalService:
        name = serving.service.name
        plan = self._admitted.plans[name]
        own = self._own.get(name)
        endpoint = own[0].url if own is not None else self._endpoint.url
        return LocalService(plan, GATEWAY_LISTEN, self._admitted.sources[name], endpoint)

    # --- start-up

    async def start(self, manifests: LocalManifests) -> Admitted | None:
        """Open the endpoint, fetch what must be fetched; None if stopped first."""
        try:
            install_server_patches()
        except UntestedServerLibrary as error:
            raise LocalRunError(str(error)) from None
        _, port = parse_listen_address(self._endpoint.listen)
        if port:
            use = PortUse(
                "", endpoint_use(self._endpoint.listen), os.getpid(), self._files.describe()
            )
            self._claims.claim(port, use)
        self._endpoint.start()
        return await self._admit(manifests)

    async def _admit(self, manifests: LocalManifests) -> Admitted | None:
        """Admitted with every model local mode fetches fetched; None if stopped meanwhile."""
        settings = self._options.admission
        while True:
            admitted = admit(manifests, settings, self._fetched)
            if not admitted.fetches:
                return admitted
            for fetch in admitted.fetches.values():
                path = await fetch_model(fetch, self._options.cache, self._environ, self.stop)
                if path is None:
                    return None
                self._fetched[fetch.uri] = path

    async def serve_initial(self, admitted: Admitted) -> int | None:
        """Apply the first set and wait until every service serves (None); the exit code when
        stopped first (0) or when a service fails to start (1, its error logged)."""
        self._apply(admitted, announce=False)
        log.info(
            log_lines.ENDPOINT,
            len(admitted.plans),
            self._endpoint.url,
            ", ".join(sorted(admitted.plans)),
        )
        for route in self.routes.routes():
            processes = route.processes
            serving = asyncio.ensure_future(asyncio.shield(processes.serving))
            stopped = asyncio.ensure_future(self.stop.wait())
            waits: set[asyncio.Future[Any]] = {serving, stopped, processes.ended}
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                serving.cancel()
            if self.stop.is_set():
                return 0
            if processes.ended.done():
                return 1  # its processes logged why
        if console.show_table(self._table):
            asyncio.get_running_loop().create_task(self._keep_table_fresh())
        return None

    # --- applying a set of services

    def _apply(self, admitted: Admitted, *, announce: bool) -> None:
        """LocalRunError, changing nothing, if a service's own endpoint cannot listen."""
        self._open_own_endpoints(admitted)
        before = self._admitted
        self._admitted = admitted
        for name in sorted(set(before.plans) - set(admitted.plans)):
            if announce:
                log.info(log_lines.SERVICE_REMOVED, name, before.sources[name])
            self._remove(name)
        routes = []
        for name, plan in admitted.plans.items():
            old = before.plans.get(name)
            if announce and old is None:
                log.info(log_lines.SERVICE_ADDED, name, admitted.sources[name])
            elif announce and old != plan:
                log.info(log_lines.SERVICE_CHANGED, name, admitted.sources[name])
            self._options.admission.devices.announce(plan.devices.vendor)
            identity = plan.serving.service
            previous = self._identities.get(name)
            if previous is not None and previous != identity:
                self._remove(name)  # another namespace: another service to the workloads
            self._identities[name] = identity
            self.workloads.apply(plan.serving)
            processes = self.workloads.processes(identity)
            current = self.routes.get(name)
            if current is not None and current.processes is processes:
                routes.append(current)
            else:
                routes.append(Route(plan, processes, self.traffic.of(name)))
                if current is not None:
                    self._later(current.close())
        self.routes.replace(routes)

    def _remove(self, name: str) -> None:
        identity = self._identities.pop(name, None)
        route = self.routes.get(name)
        if name not in self._admitted.plans:
            self._close_own_endpoint(name)
        if route is not None:
            self._later(route.close())
        if identity is not None:
            self._later(self.workloads.remove(identity))

    def _open_own_endpoints(self, admitted: Admitted) -> None:
        """Each service's own endpoint as `admitted` has it: new ones listening, moved ones
        moved, dropped ones closing; if one cannot listen, those opened here close again."""
        opened: list[str] = []
        try:
            for name, plan in admitted.plans.items():
                current = self._own.get(name)
                if current is not None and current[0].listen == plan.own_listen:
                    continue
                if plan.own_listen is not None:
                    endpoint = self._own_endpoint(name, plan.own_listen, admitted.sources[name])
                    self._close_own_endpoint(name)
                    self._own[name] = endpoint
                    opened.append(name)
                else:
                    self._close_own_endpoint(name)
        except LocalRunError:
            for name in opened:
                self._close_own_endpoint(name)
            raise

    def _own_endpoint(self, name: str, listen: str, source: str) -> tuple[_Endpoint, PortClaims]:
        claims = PortClaims()
        _, port = parse_listen_address(listen)
        claims.claim(port, PortUse(name, own_endpoint_use(listen), os.getpid(), source))
        app = LocalEndpoint(
            self.routes,
            self.metrics,
            service=name,
            api_key_file=self._options.admission.api_key_file,
        )
        endpoint = _Endpoint(app, listen)
        try:
            endpoint.start()
        except LocalRunError:
            claims.release()
            raise
        return endpoint, claims

    def _close_own_endpoint(self, name: str) -> None:
        current = self._own.pop(name, None)
        if current is not None:
            endpoint, claims = current

            async def close() -> None:
                await endpoint.stopped()
                claims.release()

            self._later(close())

    def _later(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._removing.add(task)
        task.add_done_callback(self._removing.discard)

    # --- serving: live files, failed services

    async def watch(self) -> None:
        """Until stopped: apply the files' changes, start failed services again."""
        while not self.stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WATCH_INTERVAL):
                    await self.stop.wait()
            if self.stop.is_set():
                return
            for change in self._files.changes():
                await self._change(change)
            self._restart_failed()

    async def _change(self, change: FileChange) -> None:
        try:
            if change.error is not None:
                raise change.error
            manifests = self._files.with_change(change)
            admitted = await self._admit(manifests)
            if admitted is None:
                return
            self._apply(admitted, announce=True)
        except (LocalConfigError, LocalRunError) as error:
            log.error(log_lines.EDIT_REFUSED, change.path, one_line(str(error)))
            return
        self._files.accept(change)

    def _restart_failed(self) -> None:
        """A service whose processes failed on their own starts again after its back-off."""
        now = time.monotonic()
        for route in self.routes.routes():
            state = self._restarts.setdefault(route.name, _Restart())
            ended = route.processes.ended
            if not (ended.done() and not ended.cancelled() and ended.exception() is not None):
                if now - state.applied_at >= HEALTHY_SERVING:
                    state.delay = FIRST_RESTART
                continue
            if state.due is None:
                state.due = now + state.delay
                log.info(log_lines.SERVICE_RESTARTING, route.name, state.delay)
            elif now >= state.due:
                state.due, state.applied_at = None, now
                state.delay = min(MAX_RESTART, 2 * state.delay)
                self._apply(self._admitted, announce=False)  # starts what has ended

    # --- what the endpoint shows

    async def metrics(self) -> str:
        routes = self.routes.routes()
        texts = await asyncio.gather(*(self._gateway_metrics(route) for route in routes))
        merged = merge_expositions(
            (route.name, text) for route, text in zip(routes, texts, strict=True) if text
        )
        now = time.monotonic()
        counts = []
        for route, text in zip(routes, texts, strict=True):
            tenant = route.processes.engine.devices
            counts.append(
                ServiceCounts(
                    view(route, now),
                    route.processes.engine.starts,
                    tenant.swaps if tenant is not None else 0,
                    text is not None,
                )
            )
        return merged + local_series(counts)

    async def _gateway_metrics(self, route: Route) -> str | None:
        pool = await route.gateway(0)
        if pool is None:
            return None
        try:
            async with (
                asyncio.timeout(METRICS_TIMEOUT),
                pool.exchange("GET", b"/metrics", []) as response,
            ):
                body = await response.read()
        except (*UpstreamError, TimeoutError):
            return None
        return body.decode("utf-8", errors="replace") if response.status == 200 else None

    def _table(self) -> list[str]:
        now = time.monotonic()
        return render_table([view(route, now) for route in self.routes.routes()])

    async def _keep_table_fresh(self) -> None:
        while not self.stop.is_set():
            console.refresh()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self.stop.wait()

    def _changed(self) -> None:
        self._endpoint.app.phases_changed()
        for endpoint, _ in self._own.values():
            endpoint.app.phases_changed()
        if self._refresh is None:
            self._refresh = asyncio.get_running_loop().call_soon(self._refreshed)

    def _refreshed(self) -> None:
        self._refresh = None
        console.refresh()

    # --- the end

    async def close(self) -> None:
        """Stop accepting, drain and stop every service, release every port."""
        self._endpoint.begin_stop()
        for endpoint, _ in self._own.values():
            endpoint.begin_stop()
        await self.workloads.close()
        await self._endpoint.stopped()
        for name in list(self._own):
            self._close_own_endpoint(name)
        while self._removing:
            await asyncio.wait(set(self._removing))
        for route in self.routes.routes():
            await route.close()
        self.budget.close()
        self._claims.release()
        console.hide_table()


async def run_local(
    files: ServedFiles,
    manifests: LocalManifests,
    options: RunOptions,
    environ: Mapping[str, str],
) -> int:
    """Serve until SIGINT/SIGTERM (exit code 0) or a failure to start (exit code 1, logged)."""
    loop = asyncio.get_running_loop()
    local = LocalMode(files, options, environ)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, local.stop.set)
    try:
        admitted = await local.start(manifests)
        failed = 0 if admitted is None else await local.serve_initial(admitted)
        if failed is not None:
            return failed
        await local.watch()
        log.info("shutting down")
        return 0
    except LocalRunError as error:
        log.error("%s", one_line(str(error)))
        return 1
    finally:
        await local.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        log.info(log_lines.STOPPED)
