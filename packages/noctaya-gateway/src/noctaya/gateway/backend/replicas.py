"""The backend's replicas and the choice among them: one connection pool per pod address the
EndpointSlice watch (`endpoints`) names, each request sent to the ready replica with the fewest
requests in flight from this gateway (ties at random).

A replica takes requests once its slice says ready, or once the gateway's own readiness probe
of its address answers 200, whichever comes first: while requests are held for a cold backend,
every known pod that is neither ready nor terminating is probed directly (`refresh`), so a held
request reaches a pod as soon as its engine answers, not a kubelet probe period and an
EndpointSlice update later. A terminating replica gets no new request (its streams finish); one
whose connection fails takes none until its slice turns ready again or a probe answers: it is
probed every `RECOVER_SECONDS` meanwhile, so a pod that refused once (restarting, or a SYN lost)
is not left out while its slice still says ready.

While the watch does not work (`FALLBACK`) or is not configured, readiness and requests go
through the Service URL as before (`ReadinessProbe`); `Replicas` answers for whichever applies.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Container
from typing import TYPE_CHECKING

from noctaya.gateway.backend.readiness import ReadinessProbe
from noctaya.gateway.upstream import UpstreamError, UpstreamPool

if TYPE_CHECKING:  # the watch's modules load only where it is configured (not in local mode)
    from noctaya.gateway.backend.endpoints import Endpoint, EndpointWatch

RECOVER_SECONDS = 1.0


class Replica:
    __slots__ = ("endpoint", "in_flight", "pool", "probe", "probe_began", "probed", "refused")

    def __init__(self, endpoint: Endpoint, pool: UpstreamPool) -> None:
        self.endpoint = endpoint
        self.pool = pool
        self.in_flight = 0
        """Requests this gateway has in flight on it, streams until their end."""
        self.probed = False
        """The gateway's own probe of its address answered 200 (before its slice said ready)."""
        self.refused = False
        """A connection to it failed: no new request until it is found ready again."""
        self.probe: asyncio.Task[None] | None = None
        self.probe_began = float("-inf")

    @property
    def routable(self) -> bool:
        endpoint = self.endpoint
        return (endpoint.ready or self.probed) and not endpoint.terminating and not self.refused


class Replicas:
    """The backend's readiness and where a request goes; `watch` None keeps the Service URL."""

    def __init__(
        self,
        service: ReadinessProbe,
        watch: EndpointWatch | None,
        pod_pool: Callable[[Endpoint], UpstreamPool],
        *,
        path: str,
        timeout: float,
    ) -> None:
        self._service = service
        self._watch = watch
        self._pod_pool = pod_pool
        self._path = path.encode("ascii")
        self._timeout = timeout
        self._replicas: dict[tuple[str, int], Replica] = {}
        self._routable: list[Replica] = []
        self.pods = False
        """Requests go to pod addresses: the watch works."""
        self.on_ready: Callable[[], None] | None = None
        """Called when a backend (a replica, or the Service) is found ready."""
        service.on_ready = self._service_ready
        if watch is not None:
            watch.on_change(self._sync)

    def cached_ready(self) -> bool:
        """The warm path's await-free check."""
        return bool(self._routable) if self.pods else self._service.cached_ready()

    async def ready(self) -> bool:
        return bool(self._routable) if self.pods else await self._service.ready()

    def refresh(self, max_age: float) -> None:
        """Have a fresh answer come: the Service probed, or each pod not ready yet."""
        if not self.pods:
            self._service.refresh(max_age)
            return
        now = asyncio.get_running_loop().time()
        for replica in self._replicas.values():
            if (
                replica.routable
                or replica.endpoint.terminating
                or replica.probe is not None
                or now - replica.probe_began < max_age
            ):
                continue
            replica.probe_began = now
            replica.probe = asyncio.get_running_loop().create_task(self._probe_once(replica))

    def forget(self) -> None:
        """No backend could be reached: the next asker probes the Service (replicas that
        refused were set aside by `set_aside`)."""
        if not self.pods:
            self._service.forget()

    def choose(self, tried: Container[Replica]) -> Replica | None:
        """The routable replica with the fewest requests in flight, not in `tried`."""
        best: Replica | None = None
        ties = 0
        for replica in self._routable:
            if replica in tried:
                continue
            if best is None or replica.in_flight < best.in_flight:
                best, ties = replica, 1
            elif replica.in_flight == best.in_flight:
                ties += 1
                if random.randrange(ties) == 0:  # each of the tied equally likely
                    best = replica
        return best

    def set_aside(self, replica: Replica) -> None:
        """`replica` could not be connected to: it takes nothing until found ready again."""
        replica.refused = True
        replica.pool.close_idle()
        self._reroute()
        if replica.probe is None:
            replica.probe = asyncio.get_running_loop().create_task(self._recover(replica))

    async def close(self) -> None:
        for replica in self._replicas.values():
            await _stop(replica)
            replica.pool.retire()
        self._replicas.clear()
        self._routable = []
        await self._service.close()

    def _sync(self) -> None:
        watch = self._watch
        assert watch is not None
        was_ready = self.cached_ready()
        self.pods = watch.watching
        current = {_key(each): each for each in watch.endpoints()}
        for key in self._replicas.keys() - current.keys():
            gone = self._replicas.pop(key)
            if gone.probe is not None:
                gone.probe.cancel()
            gone.pool.retire()
        for key, endpoint in current.items():
            replica = self._replicas.get(key)
            if replica is None:
                self._replicas[key] = Replica(endpoint, self._pod_pool(endpoint))
                continue
            if replica.endpoint.ready and not endpoint.ready:
                replica.probed = False  # its slice says it stopped being ready: believe it
            elif endpoint.ready and not replica.endpoint.ready:
                replica.refused = False
            replica.endpoint = endpoint
        self._reroute()
        if not was_ready and self.cached_ready():
            self._notify()

    def _reroute(self) -> None:
        self._routable = [replica for replica in self._replicas.values() if replica.routable]

    async def _probe_once(self, replica: Replica) -> None:
        try:
            await self._probe(replica)
        finally:
            replica.probe = None

    async def _recover(self, replica: Replica) -> None:
        """Probe a replica set aside until it answers, turns ready in its slice, or leaves."""
        try:
            while replica.refused and not replica.endpoint.terminating:
                await asyncio.sleep(RECOVER_SECONDS)
                if self._replicas.get(_key(replica.endpoint)) is not replica:
                    return
                if replica.refused:
                    await self._probe(replica)
        finally:
            replica.probe = None

    async def _probe(self, replica: Replica) -> bool:
        ready = False
        try:
            async with (
                asyncio.timeout(self._timeout),
                replica.pool.exchange("GET", replica.pool.path_prefix + self._path, []) as answer,
            ):
                await answer.read()
                ready = answer.status == 200
        except UpstreamError:
            ready = False
        if not ready:
            replica.pool.close_idle()
            return False
        replica.probed = True
        replica.refused = False
        self._reroute()
        self._notify()
        return True

    def _service_ready(self) -> None:
        if not self.pods:
            self._notify()

    def _notify(self) -> None:
        if self.on_ready is not None:
            self.on_ready()


def _key(endpoint: Endpoint) -> tuple[str, int]:
    return endpoint.address, endpoint.port


async def _stop(replica: Replica) -> None:
    if replica.probe is not None:
        replica.probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await replica.probe
