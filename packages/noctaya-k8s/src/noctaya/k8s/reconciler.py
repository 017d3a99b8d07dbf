"""The LLMService reconcile: plan (the core's planner), apply and observe (a workload
orchestrator), and report status.

The reconciler knows the workloads only through the core's `WorkloadOrchestrator` port, handed
to it where the operator is wired (`noctaya.k8s.controller`), so it can be driven with an
in-memory one. Planning is pure and done before the orchestrator is asked anything, so an
invalid spec changes nothing; the first error wins with its reason and becomes the
Ready/Degraded condition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client.exceptions import ApiException
from noctaya.core.api import LLMService, read_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import ServiceObservation
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.planner import PlanSettings, ServicePlanner
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.ports import FailedAfterAutoscaling, WorkloadOrchestrator
from noctaya.core.status import decide_event, failing_tier, failure_status, success_status
from noctaya.k8s import kinds
from noctaya.k8s.events import EventRecorder
from noctaya.k8s.planning import api_message
from noctaya.k8s.reader import KubeObject, Reader
from noctaya.k8s.runtime.resources import ResourceResolver
from noctaya.k8s.status_writer import StatusWriter

_log = logging.getLogger(__name__)
OperatorSettings = PlanSettings
"""The operator's flags that shape every plan."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LLMServiceReconciler:
    def __init__(
        self,
        resolver: ResourceResolver,
        reader: Reader,
        planner: ServicePlanner,
        workloads: WorkloadOrchestrator,
        *,
        now: Callable[[], str] = _now,
    ) -> None:
        """`reader` is where services are read (the planner reads runtimes through its own);
        `resolver` reaches the API server for status and events."""
        self._reader = reader
        self._planner = planner
        self._workloads = workloads
        self._status = StatusWriter(resolver)
        self._events = EventRecorder(resolver)
        self._now = now

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        live = self._reader.get(kinds.LLMSERVICE, namespace, name)
        if live is None:
            self._workloads.remove(ServiceIdentity(name=name, namespace=namespace))
            return
        try:
            service = read_llmservice(live)
            plan = self._planner.plan(service)
            self._workloads.apply(plan)
        except NoctayaError as error:
            self._report_failure(
                live, error, autoscaling_applied=isinstance(error, FailedAfterAutoscaling)
            )
            raise
        try:
            observation = self._workloads.observe(plan)
        except NoctayaError as error:  # the whole plan, its autoscaling with it, is in place
            self._report_failure(live, error, autoscaling_applied=True)
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
