"""The local engine: zero or one process, kept running while wanted — a one-replica Deployment.

While scaled to one, an engine that exits is started again after a back-off that doubles from
1 s to 30 s (as the kubelet's crash-loop back-off does) and resets once a run lasted 10 s, so a
broken command neither spins nor gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import Mapping

from noctaya.gateway.local import log_lines
from noctaya.gateway.local.plan import EnginePlan
from noctaya.gateway.local.processes import ManagedProcess, describe_exit

log = logging.getLogger("noctaya.local")
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
HEALTHY_RUN = 10.0


class EngineReplica:
    def __init__(self, plan: EnginePlan, environ: Mapping[str, str]) -> None:
        self._plan = plan
        self._env = {**environ, **plan.env}
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.process: ManagedProcess | None = None
        """The running engine process, if any (tests and the demo read its pid)."""

    @property
    def replicas(self) -> int:
        return 0 if self._supervisor is None else 1

    async def scale(self, replicas: int) -> None:
        """Start the engine (`replicas` ≥ 1) or stop it and wait until it is gone (0)."""
        if replicas > 0 and self._supervisor is None:
            self._stopping = asyncio.Event()
            self._supervisor = asyncio.get_running_loop().create_task(
                self._supervise(self._stopping)
            )
        elif replicas == 0 and self._supervisor is not None:
            # The replica counts until its process is gone, as a pod does until it terminates.
            self._stopping.set()
            await self._supervisor
            self._supervisor = None

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
            backoff = FIRST_BACKOFF if loop.time() - started >= HEALTHY_RUN else backoff
            log.info("restarting the engine in %gs", backoff)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await stopping.wait()
                    return
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _run(self, process: ManagedProcess, stopping: asyncio.Event) -> bool:
        """Until the engine exits (False) or is stopped on request (True)."""
        self.process = process
        log.info(log_lines.ENGINE_STARTED, process.pid, shlex.join(self._plan.argv))
        exited = asyncio.ensure_future(process.wait())
        stop = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({exited, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if exited.done():
            self.process = None
            log.warning(log_lines.ENGINE_EXITED, process.pid, describe_exit(exited.result()))
            return stopping.is_set()
        exited.cancel()
        code = await process.stop(self._plan.stop_grace_seconds)
        self.process = None
        log.info(log_lines.ENGINE_STOPPED, process.pid, describe_exit(code))
        return True
