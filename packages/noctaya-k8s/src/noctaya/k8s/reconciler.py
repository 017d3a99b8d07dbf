"""The LLMService reconcile: plan (the core's planner), apply and observe (the cluster's
workload orchestrator), and report status.

Planning and rendering are pure and finish before the first write, so an invalid spec changes
nothing; the first error wins with its reason and becomes the Ready/Degraded condition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client.exceptions import ApiException
from noctaya.core.api import LLMService, read_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import ServiceObservation
from noctaya.core.plan.planner import PlanSettings
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.plugins import VendorRegistry
from noctaya.core.status import decide_event, failing_tier, failure_status, success_status
from noctaya.k8s import kinds
from noctaya.k8s.apply import Applier
from noctaya.k8s.events import EventRecorder
from noctaya.k8s.planning import ServicePlanner, api_message
from noctaya.k8s.reader import ApiReader, KubeObject, Reader
from noctaya.k8s.runtime.resources import ResourceResolver
from noctaya.k8s.status_writer import StatusWriter
from noctaya.k8s.workloads import ClusterWorkloads

_log = logging.getLogger(__name__)
OperatorSettings = PlanSettings
"""The operator's flags that shape every plan."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LLMServiceReconciler:
    def __init__(
        self,
        resolver: ResourceResolver,
        vendors: VendorRegistry,
        settings: OperatorSettings,
        *,
        reader: Reader | None = None,
        now: Callable[[], str] = _now,
    ) -> None:
        self._resolver = resolver
        self._reader: Reader = reader or ApiReader(resolver)
        self._applier = Applier(resolver, self._reader)
        self._status = StatusWriter(resolver)
        self._events = EventRecorder(resolver)
        self._planner = ServicePlanner(self._reader, vendors, settings)
        self._now = now

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        live = self._reader.get(kinds.LLMSERVICE, namespace, name)
        if live is None:
            return
        workloads = ClusterWorkloads(self._applier, self._reader, owner=live)
        try:
            service = read_llmservice(live)
            plan = self._planner.plan(service)
            workloads.apply(plan)
            observation = workloads.observe(plan)
        except NoctayaError as error:
            self._report_failure(live, error, workloads.autoscaling_applied)
            raise
        _log.info(
            "Reconciled LLMService",
            extra={
                "llmservice": f"{namespace}/{name}",
                "runtime": plan.runtime,
                "readyReplicas": observation.backend.ready_replicas,
            },
        )
        self._report_success(live, service, plan, observation)

    # -- status -------------------------------------------------------------------------------

    def _report_success(
        self,
        live: KubeObject,
        service: LLMService,
        plan: ServingPlan,
        observation: ServiceObservation,
    ) -> None:
        now = self._now()
        generation = int(live["metadata"].get("generation") or 0)
        written = self._status.write(
            live,
            lambda previous: success_status(
                previous,
                observation,
                service=plan.service.name,
                namespace=plan.service.namespace,
                runtime=plan.runtime,
                generation=generation,
                scaling_min=service.spec.scaling.min,
                now=now,
            ),
        )
        if written is None:
            return
        previous, status, obj = written
        gateway_failing = failing_tier(observation) is observation.gateway
        event = decide_event(
            previous.conditions, status.conditions, gateway_failing=gateway_failing
        )
        if event is not None:
            if event.type == "Warning":
                _log.info(
                    "Observed gateway failure"
                    if gateway_failing
                    else "Observed backend activation failure",
                    extra={"failureClass": event.reason},
                )
            else:
                _log.info("Observed backend activation recovery")
            self._events.record(obj, event)

    def _report_failure(
        self, live: KubeObject, error: NoctayaError, autoscaling_applied: bool
    ) -> None:
        meta = live["metadata"]
        now = self._now()
        generation = int(meta.get("generation") or 0)
        try:
            self._status.write(
                live,
                lambda previous: failure_status(
                    previous,
                    error,
                    generation=generation,
                    autoscaling_applied=autoscaling_applied,
                    now=now,
                ),
            )
        except ApiException as write_error:
            _log.warning("could not write failure status: %s", api_message(write_error))
