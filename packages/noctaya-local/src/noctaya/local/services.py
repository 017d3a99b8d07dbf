"""The services of the files applied to a `WorkloadOrchestrator`, by name: what the operator's
reconciler is to a cluster, for the set of services one local mode serves.

An added service is applied, a changed one applied again (the orchestrator replaces what
changed), a removed one removed; a service whose file moved it to another namespace is another
service to the orchestrator, so the old one is removed first. `ServiceSet` knows the
orchestrator only through the port, so it is tested with an in-memory one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.ports import WorkloadOrchestrator
from noctaya.local import log_lines
from noctaya.local.admission import Admitted
from noctaya.local.workloads import LocalService

log = logging.getLogger("noctaya.local")
GATEWAY_LISTEN = "127.0.0.1:0"
"""Each gateway listens privately; clients come through local mode's endpoints."""


class Placement:
    """How a serving plan maps onto this machine: the local plan and file of the admitted
    service it belongs to, and the endpoint its clients use. `LocalWorkloads` asks it for every
    plan it is given."""

    def __init__(self, endpoint_of: Callable[[str], str]) -> None:
        self.admitted = Admitted({}, {})
        self._endpoint_of = endpoint_of

    def translate(self, serving: ServingPlan) -> LocalService:
        name = serving.service.name
        plan = self.admitted.plans[name]
        source = self.admitted.sources[name]
        return LocalService(plan, GATEWAY_LISTEN, source, self._endpoint_of(name))


class ServiceSet:
    def __init__(
        self,
        workloads: WorkloadOrchestrator,
        placement: Placement,
        announce_vendor: Callable[[str], None] = lambda vendor: None,
    ) -> None:
        self._workloads = workloads
        self._placement = placement
        self._announce_vendor = announce_vendor
        self._identities: dict[str, ServiceIdentity] = {}

    @property
    def admitted(self) -> Admitted:
        return self._placement.admitted

    def apply(self, admitted: Admitted, *, announce: bool) -> list[str]:
        """Make the orchestrator run `admitted`; the names of the services removed. `announce`
        logs each service added, changed or removed."""
        before = self._placement.admitted
        self._placement.admitted = admitted
        removed = sorted(set(before.plans) - set(admitted.plans))
        for name in removed:
            if announce:
                log.info(log_lines.SERVICE_REMOVED, name, before.sources[name])
            self.remove(name)
        for name, plan in admitted.plans.items():
            old = before.plans.get(name)
            if announce and old is None:
                log.info(log_lines.SERVICE_ADDED, name, admitted.sources[name])
            elif announce and old != plan:
                log.info(log_lines.SERVICE_CHANGED, name, admitted.sources[name])
            self._announce_vendor(plan.devices.vendor)
            identity = plan.serving.service
            previous = self._identities.get(name)
            if previous is not None and previous != identity:
                self._workloads.remove(previous)
            self._identities[name] = identity
            self._workloads.apply(plan.serving)
        return removed

    def remove(self, name: str) -> None:
        identity = self._identities.pop(name, None)
        if identity is not None:
            self._workloads.remove(identity)

    def identity(self, name: str) -> ServiceIdentity:
        return self._identities[name]
