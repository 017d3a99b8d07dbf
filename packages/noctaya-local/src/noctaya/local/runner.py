"""One run of `noctaya-local`: the endpoints, the services of the files (applied to the local
workloads), their files watched, until SIGINT/SIGTERM; then everything stopped.

Start-up fails fast: if a service cannot start (a port in use, a gateway that does not come
up), local mode stops everything and exits 1. Once serving, a service whose gateway fails is
started again after a back-off (`restarts`), while the others serve on; so is a service a live
edit added that cannot start yet.

A live edit applies to the services it touches only: an added service starts, a changed one
drains and restarts, a removed one drains and stops; the others' requests go on. The files are
read on a worker thread (`live_files`), so a file that is slow or hostile to read never holds
up the endpoints or the signals; what changed in one look is judged and applied as one set.

`LocalMode` keeps the services as the files have them and applies them; what clients reach is
`endpoints`, what runs is the workloads (`workloads`), what a scrape shows is `local_metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from noctaya.gateway.server.patches import install_server_patches
from noctaya.gateway.server.tested_versions import UntestedServerLibrary
from noctaya.local import console, local_metrics, log_lines
from noctaya.local.admission import AdmissionSettings, Admitted, admit
from noctaya.local.endpoints import Endpoints
from noctaya.local.engine_logs import EngineLogs
from noctaya.local.errors import LocalConfigError, LocalRunError, one_line
from noctaya.local.live_files import WATCH_INTERVAL, Edit, ServedFiles
from noctaya.local.model_fetch import fetch_model
from noctaya.local.restarts import Restarts
from noctaya.local.routes import Route, RouteTable
from noctaya.local.service_view import view
from noctaya.local.services import Placement, ServiceSet
from noctaya.local.sources import LocalManifests
from noctaya.local.status_table import render_table
from noctaya.local.swaps import DeviceBudget
from noctaya.local.traffic import TrafficBoard
from noctaya.local.workloads import LocalWorkloads, Machine

log = logging.getLogger("noctaya.local")


@dataclass(frozen=True)
class RunOptions:
    admission: AdmissionSettings
    logs: Path
    cache: Path
    min_residency: float


@dataclass
class Parts:
    """What one local mode is made of, made by `compose`, the one place they are wired."""

    budget: DeviceBudget
    traffic: TrafficBoard
    routes: RouteTable
    endpoints: Endpoints
    workloads: LocalWorkloads
    services: ServiceSet


def compose(options: RunOptions, environ: Mapping[str, str]) -> Parts:
    """Local mode's composition root: the workloads (its `WorkloadOrchestrator`) are made here
    and handed to the `ServiceSet` that drives them, typed against the port."""
    routes = RouteTable()
    admission = options.admission
    endpoints = Endpoints(
        routes,
        lambda: local_metrics.scrape(routes.routes()),
        admission.listen,
        admission.api_key_file,
    )
    refresh = _Refresh(endpoints)
    budget = DeviceBudget(options.min_residency)
    traffic = TrafficBoard()
    traffic.listen(budget.changed)
    budget.listen(refresh)
    machine = Machine(admission.devices, budget, traffic, EngineLogs(options.logs), refresh)
    placement = Placement(endpoints.url_of)
    workloads = LocalWorkloads(placement.translate, environ, machine)
    services = ServiceSet(workloads, placement, admission.devices.announce)
    return Parts(budget, traffic, routes, endpoints, workloads, services)


class _Refresh:
    """Every change of a service's processes: held streams on every endpoint hear it, and the
    status table is redrawn once per turn of the loop however many changes it brings."""

    def __init__(self, endpoints: Endpoints) -> None:
        self._endpoints = endpoints
        self._pending: asyncio.Handle | None = None

    def __call__(self) -> None:
        self._endpoints.phases_changed()
        if self._pending is None:
            self._pending = asyncio.get_running_loop().call_soon(self._refreshed)

    def _refreshed(self) -> None:
        self._pending = None
        console.refresh()


class LocalMode:
    def __init__(
        self, files: ServedFiles, options: RunOptions, environ: Mapping[str, str], parts: Parts
    ) -> None:
        self._files = files
        self._options = options
        self._environ = environ
        self.budget = parts.budget
        self.traffic = parts.traffic
        self.routes = parts.routes
        self.endpoints = parts.endpoints
        self.workloads = parts.workloads
        self.services = parts.services
        self._fetched: dict[str, str] = {}
        self._restarts = Restarts()
        self._removing: set[asyncio.Task[None]] = set()
        self.stop = asyncio.Event()

    # --- start-up

    async def start(self, manifests: LocalManifests) -> Admitted | None:
        """Open the endpoint, fetch what must be fetched; None if stopped first."""
        try:
            install_server_patches()
        except UntestedServerLibrary as error:
            raise LocalRunError(str(error)) from None
        self.endpoints.start_shared(self._files.describe())
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
            self.endpoints.shared.url,
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
        self.endpoints.open_own(admitted)
        for name in self.services.apply(admitted, announce=announce):
            self.endpoints.close_own(name)
            route = self.routes.get(name)
            if route is not None:
                self._later(route.close())
        routes = []
        for name, plan in admitted.plans.items():
            processes = self.workloads.processes(self.services.identity(name))
            current = self.routes.get(name)
            if current is not None and current.processes is processes:
                routes.append(current)
            else:
                routes.append(Route(plan, processes, self.traffic.of(name)))
                if current is not None:
                    self._later(current.close())
        self.routes.replace(routes)

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
            edit = await asyncio.to_thread(self._files.look)
            if edit is not None:
                await self._edit(edit)
            self._restart_failed()

    async def _edit(self, edit: Edit) -> None:
        for path, error in edit.refused:
            log.error(log_lines.EDIT_REFUSED, path, one_line(str(error)))
        if not edit.differs:
            return
        try:
            admitted = await self._admit(edit.manifests())
            if admitted is None:
                return
            self._apply(admitted, announce=True)
        except (LocalConfigError, LocalRunError) as error:
            log.error(log_lines.EDIT_REFUSED, edit.describe(), one_line(str(error)))
            return
        self._files.accept(edit)

    def _restart_failed(self) -> None:
        if self._restarts.due(self.routes.routes(), time.monotonic()):
            self._apply(self.services.admitted, announce=False)  # starts what has ended

    # --- what the endpoint shows

    def _table(self) -> list[str]:
        now = time.monotonic()
        return render_table([view(route, now) for route in self.routes.routes()])

    async def _keep_table_fresh(self) -> None:
        while not self.stop.is_set():
            console.refresh()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await self.stop.wait()

    # --- the end

    async def close(self) -> None:
        """Stop accepting, drain and stop every service, release every port."""
        self.endpoints.begin_stop()
        await self.workloads.close()
        await self.endpoints.close()
        while self._removing:
            await asyncio.wait(set(self._removing))
        for route in self.routes.routes():
            await route.close()
        self.budget.close()
        console.hide_table()


async def run_local(
    files: ServedFiles,
    manifests: LocalManifests,
    options: RunOptions,
    environ: Mapping[str, str],
) -> int:
    """Serve until SIGINT/SIGTERM (exit code 0) or a failure to start (exit code 1, logged)."""
    loop = asyncio.get_running_loop()
    local = LocalMode(files, options, environ, compose(options, environ))
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
