"""The local engine: zero or one process, kept running while wanted — a one-replica Deployment
and the kubelet that runs its pod.

While scaled to one, an engine that exits is started again after a back-off that doubles from
1 s to 30 s (as the kubelet's crash-loop back-off does) and resets once a run lasted 10 s, so a
broken command neither spins nor gives up. While it runs, its readiness check runs too
(`noctaya.gateway.local.readiness`); without one it counts as ready once started, as a
container without a readiness probe does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import Mapping

from noctaya.core.observation import CRASH_LOOP_BACK_OFF, DeploymentFacts, PodFacts
from noctaya.gateway.local import log_lines
from noctaya.gateway.local.plan import EnginePlan
from noctaya.gateway.local.processes import ManagedProcess, describe_exit
from noctaya.gateway.local.readiness import PortNames, watch_readiness

log = logging.getLogger("noctaya.local")
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
HEALTHY_RUN = 10.0


class EngineReplica:
    def __init__(self, plan: EnginePlan, environ: Mapping[str, str]) -> None:
        self._plan = plan
        self._env = {**environ, **plan.env}
        self._ports = PortNames(plan.port_name, plan.port)
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.process: ManagedProcess | None = None
        """The running engine process, if any (tests and the demo read its pid)."""
        self.ready = False
        self.restarts = 0
        """Exits since the replica was last scaled up, as a container's restart count."""
        self._last_exit: int | None = None
        self._backing_off = False

    @property
    def replicas(self) -> int:
        return 0 if self._supervisor is None else 1

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
            started = loop.time()
            try:
                process = await ManagedProcess.start("engine", self._plan.argv, self._env)
            except OSError as error:
                log.error("engine failed to start: %s", error)
            else:
                if await self._run(process, stopping):
                    return
            self.restarts += 1
            backoff = FIRST_BACKOFF if loop.time() - started >= HEALTHY_RUN else backoff
            log.info("restarting the engine in %gs", backoff)
            self._backing_off = True
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await stopping.wait()
                        return
            finally:
                self._backing_off = False
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _run(self, process: ManagedProcess, stopping: asyncio.Event) -> bool:
        """Until the engine exits (False) or is stopped on request (True)."""
        self.process = process
        log.info(log_lines.ENGINE_STARTED, process.pid, shlex.join(self._plan.argv))
        checking = self._check_readiness()
        exited = asyncio.ensure_future(process.wait())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({exited, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            checking.cancel()
            await asyncio.wait({checking})
            self.ready = False
        if exited.done():
            self.process = None
            self._last_exit = exited.result()
            log.warning(log_lines.ENGINE_EXITED, process.pid, describe_exit(exited.result()))
            return stopping.is_set()
        exited.cancel()
        code = await process.stop(self._plan.stop_grace_seconds)
        self.process = None
        log.info(log_lines.ENGINE_STOPPED, process.pid, describe_exit(code))
        return True

    def _check_readiness(self) -> asyncio.Task[None]:
        check = self._plan.readiness
        if check is None:
            self.ready = True
            return asyncio.ensure_future(asyncio.sleep(0))

        def report(ready: bool) -> None:
            self.ready = ready

        return asyncio.ensure_future(watch_readiness(check, self._ports, report))
