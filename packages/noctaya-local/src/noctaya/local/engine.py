"""The local engine: zero or one process, kept running while wanted — a one-replica Deployment
and the kubelet that runs its pod.

While scaled to one, an engine that exits is started again after a back-off that doubles from
1 s to 30 s (as the kubelet's crash-loop back-off does) and resets once a run lasted 10 s, so a
broken command neither spins nor gives up. While it runs, its readiness check runs too
(`noctaya.local.readiness`); without one it counts as ready once started, as a
container without a readiness probe does.

When the engine's devices are budgeted (`noctaya.local.swaps`), each start first waits
for them, as a pod waits to be scheduled on a free device, and the process gets the vendor's
visible-devices variable naming them; they are given back once its process group is gone. An
engine stopped to hand its devices on (swapped out) stays scaled to one and claims them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import shlex
from collections.abc import Callable, Mapping

from noctaya.core.observation import CRASH_LOOP_BACK_OFF, DeploymentFacts, PodFacts
from noctaya.local import log_lines
from noctaya.local.plan import EnginePlan
from noctaya.local.processes import ManagedProcess, describe_exit
from noctaya.local.readiness import PortNames, watch_readiness
from noctaya.local.swaps import Grant, Tenant

log = logging.getLogger("noctaya.local")
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
HEALTHY_RUN = 10.0


class _Ended(enum.Enum):
    STOPPED = enum.auto()  # scaled to zero
    SWAPPED_OUT = enum.auto()  # its devices went to another engine
    EXITED = enum.auto()  # on its own, or it could not start


class EngineReplica:
    def __init__(
        self,
        plan: EnginePlan,
        environ: Mapping[str, str],
        *,
        service: str = "",
        devices: Tenant | None = None,
        on_line: Callable[[str], None] | None = None,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        """`service` names it in log lines; `devices` is its share of the device budget (None:
        not budgeted); `on_line` gets its output lines; `on_change` hears each change of its
        process or readiness."""
        self._plan = plan
        self._env = {**environ, **plan.env}
        self._ports = PortNames(plan.port_name, plan.port)
        self._service = service
        self.devices = devices
        self._on_line = on_line
        self._on_change = on_change
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._swap_out = asyncio.Event()
        self.process: ManagedProcess | None = None
        """The running engine process, if any (tests and the demo read its pid)."""
        self.started_at: float | None = None
        """When the running process started (event-loop time)."""
        self.ready = False
        self.stopping = False
        """Its process is being stopped."""
        self.restarts = 0
        """Exits since the replica was last scaled up, as a container's restart count."""
        self.starts = 0
        """Processes started, swaps and restarts included."""
        self._last_exit: int | None = None
        self._backing_off = False
        if devices is not None:
            devices.preempt = self._swap_out.set

    @property
    def replicas(self) -> int:
        return 0 if self._supervisor is None else 1

    @property
    def backing_off(self) -> bool:
        return self._backing_off

    async def scale(self, replicas: int) -> None:
        """Start the engine (`replicas` ≥ 1) or stop it and wait until it is gone (0)."""
        if replicas > 0 and self._supervisor is None:
            self._stopping = asyncio.Event()
            self.restarts, self._last_exit = 0, None
            self._supervisor = asyncio.get_running_loop().create_task(
                self._supervise(self._stopping)
            )
        elif replicas == 0 and self._supervisor is not None:
            # The replica counts until its process is gone, as a pod does until it terminates.
            self._stopping.set()
            await self._supervisor
            self._supervisor = None
            self._on_change()

    def facts(self, name: str) -> tuple[DeploymentFacts, list[PodFacts]]:
        """The replica as a Deployment and its pod would report it; `name` names the pod."""
        ready = int(self.ready)
        deployment = DeploymentFacts(self.replicas, ready_replicas=ready, available_replicas=ready)
        if self._supervisor is None:
            return deployment, []
        last = None if self._last_exit is None else "Completed" if self._last_exit == 0 else "Error"
        pod = PodFacts(
            name=name,
            phase="Running" if self.process is not None else "Pending",
            waiting_reason=CRASH_LOOP_BACK_OFF if self._backing_off else None,
            last_terminated_reason=last,
            restart_count=self.restarts,
            running=self.process is not None,
            ready=self.ready,
        )
        return deployment, [pod]

    async def _supervise(self, stopping: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        backoff = FIRST_BACKOFF
        while True:
            granted = await self._devices_for(stopping)
            if stopping.is_set():
                if granted is not None:
                    granted.release()
                return
            started = loop.time()
            ended = await self._run_with(granted, stopping)
            if ended is _Ended.STOPPED:
                return
            if ended is _Ended.SWAPPED_OUT:
                continue
            self.restarts += 1
            backoff = FIRST_BACKOFF if loop.time() - started >= HEALTHY_RUN else backoff
            log.info(log_lines.RESTARTING, self._service, backoff)
            self._backing_off = True
            self._on_change()
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await stopping.wait()
                        return
            finally:
                self._backing_off = False
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _devices_for(self, stopping: asyncio.Event) -> Grant | None:
        """The budget's grant (None when not budgeted, or when asked to stop first)."""
        if self.devices is None:
            return None
        self._on_change()
        acquiring = asyncio.ensure_future(self.devices.acquire())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({acquiring, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not acquiring.done():
                acquiring.cancel()
            await asyncio.wait({acquiring})
        if acquiring.cancelled():
            return None
        return acquiring.result()

    async def _run_with(self, granted: Grant | None, stopping: asyncio.Event) -> _Ended:
        """Start the process with the granted devices and run it; the devices are released once
        its group is gone, however it ends."""
        env = self._env if granted is None else {**self._env, **granted.env}
        self._swap_out.clear()
        try:
            try:
                process = await ManagedProcess.start(
                    f"{self._service} engine", self._plan.argv, env, self._on_line
                )
            except OSError as error:
                log.error(log_lines.ENGINE_START_FAILED, self._service, error)
                return _Ended.EXITED
            return await self._run(process, stopping)
        finally:
            if granted is not None:
                granted.release()
            self._on_change()

    async def _run(self, process: ManagedProcess, stopping: asyncio.Event) -> _Ended:
        """Until the engine exits, is stopped on request or is swapped out."""
        self.process = process
        self.starts += 1
        self.started_at = asyncio.get_running_loop().time()
        if self.devices is not None:
            self.devices.spawned()
        log.info(log_lines.ENGINE_STARTED, self._service, process.pid, shlex.join(self._plan.argv))
        self._on_change()
        checking = self._check_readiness()
        exited = asyncio.ensure_future(process.wait())
        stop = asyncio.ensure_future(stopping.wait())
        swap_out = asyncio.ensure_future(self._swap_out.wait())
        try:
            await asyncio.wait({exited, stop, swap_out}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            swap_out.cancel()
            checking.cancel()
            await asyncio.wait({checking})
            self.ready = False
        if exited.done():
            self.process = self.started_at = None
            self._last_exit = exited.result()
            log.warning(
                log_lines.ENGINE_EXITED, self._service, process.pid, describe_exit(exited.result())
            )
            return _Ended.STOPPED if stopping.is_set() else _Ended.EXITED
        exited.cancel()
        self.stopping = True
        self._on_change()
        try:
            code = await process.stop(self._plan.stop_grace_seconds)
        finally:
            self.stopping = False
        self.process = self.started_at = None
        log.info(log_lines.ENGINE_STOPPED, self._service, process.pid, describe_exit(code))
        return _Ended.STOPPED if stopping.is_set() else _Ended.SWAPPED_OUT

    def _check_readiness(self) -> asyncio.Task[None]:
        check = self._plan.readiness
        if check is None:
            self._report_ready(True)
            return asyncio.ensure_future(asyncio.sleep(0))
        return asyncio.ensure_future(watch_readiness(check, self._ports, self._report_ready))

    def _report_ready(self, ready: bool) -> None:
        self.ready = ready
        if ready and self.devices is not None:
            self.devices.became_ready()
        self._on_change()
