"""Which service answers a request: every name a client may put in `model`, mapped to the
service that serves it, and each service's gateway as a destination.

A service answers to the names its engine answers to (`LocalPlan.model_names`: the engine's
served names as the core reads them from its args, which the gateway also lists) and to its own
name. Requests naming the service are sent on naming the engine's first served name, which is
the one the engine knows.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from noctaya.gateway.upstream import UpstreamPool
from noctaya.local.plan import LocalPlan
from noctaya.local.traffic import Traffic
from noctaya.local.workloads import ServiceProcesses


class Route:
    """One service as the endpoint reaches it."""

    def __init__(self, plan: LocalPlan, processes: ServiceProcesses, traffic: Traffic) -> None:
        self.plan = plan
        self.processes = processes
        self.traffic = traffic
        self.created = int(time.time())
        self._pool: UpstreamPool | None = None

    @property
    def name(self) -> str:
        return self.plan.service_name

    @property
    def model(self) -> str:
        """The name the engine knows the model by (its first served name)."""
        return self.plan.model_names[0]

    async def gateway(self, within: float) -> UpstreamPool | None:
        """The service's gateway, once it serves; None if it does not within `within` seconds
        (it is starting or has failed)."""
        if self.processes.ended.done():
            return None  # stopped, or failed and to be started again
        if self._pool is None:
            serving = self.processes.serving
            try:
                url = await asyncio.wait_for(asyncio.shield(serving), within)
            except TimeoutError:
                return None
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if serving.cancelled() and not (task is not None and task.cancelling()):
                    return None  # the service stopped; this request was not cancelled
                raise
            self._pool = UpstreamPool(url.removesuffix("/v1"))
        return self._pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()


class RouteTable:
    def __init__(self) -> None:
        self._routes: dict[str, Route] = {}
        self._by_model: dict[str, Route] = {}

    def replace(self, routes: Iterable[Route]) -> None:
        """The served set from now on (no two of them answer to one name: checked when they
        were admitted)."""
        self._routes = {route.name: route for route in sorted(routes, key=lambda r: r.name)}
        self._by_model = {}
        for route in self._routes.values():
            for model in route.plan.model_names:
                self._by_model.setdefault(model, route)

    def routes(self) -> list[Route]:
        return list(self._routes.values())

    def get(self, service: str) -> Route | None:
        return self._routes.get(service)

    def for_model(self, model: str) -> Route | None:
        return self._by_model.get(model)

    def model_names(self) -> list[str]:
        """Every name a request may use, sorted."""
        return sorted(self._by_model)
