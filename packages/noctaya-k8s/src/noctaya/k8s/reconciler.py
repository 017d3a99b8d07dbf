"""The LLMService reconcile: resolve, plan and render everything, then apply in order, observe,
and report status.

Planning and rendering are pure and finish before the first write, so an invalid spec changes
nothing; the first error wins with its reason and becomes the Ready/Degraded condition.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from kubernetes.client.exceptions import ApiException
from noctaya.core.api import LLMService, read_llmservice
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import BackendObservation
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.plugins import VendorRegistry
from noctaya.core.status import decide_event, failure_status, success_status
from noctaya.k8s import kinds
from noctaya.k8s.apply import Applier
from noctaya.k8s.events import EventRecorder
from noctaya.k8s.observe import observe
from noctaya.k8s.planning import ServicePlanner, api_message, api_step
from noctaya.k8s.reader import ApiReader, KubeObject, Reader
from noctaya.k8s.render.labels import backend_pod_selector
from noctaya.k8s.render.serving import RenderedService, render_serving
from noctaya.k8s.runtime.resources import (
    KindNotServed,
    ResourceKind,
    ResourceResolver,
    api_status,
)
from noctaya.k8s.status_writer import StatusWriter

_log = logging.getLogger(__name__)
AUTOSCALING_UNAVAILABLE_PREFIX = (
    "KEDA ScaledObject CRD is required before deploying an LLMService: "
)
_MIN_DEMAND_TOKEN = 32


@dataclass(frozen=True)
class OperatorSettings:
    gateway_image: str
    gateway_replicas: int = 1
    fetch_image: str | None = None
    """The prewarm / staging Job's image; None: the gateway image (the main image holds both)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Progress:
    """How far a reconcile got: a failure after the ScaledObject keeps AutoscalingReady True."""

    autoscaling_applied = False


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
        self._planner = ServicePlanner(
            self._reader,
            vendors,
            gateway_image=settings.gateway_image,
            gateway_replicas=settings.gateway_replicas,
            fetch_image=settings.fetch_image,
        )
        self._now = now

    def reconcile(self, key: tuple[str, str]) -> None:
        namespace, name = key
        live = self._reader.get(kinds.LLMSERVICE, namespace, name)
        if live is None:
            return
        progress = _Progress()
        try:
            service = read_llmservice(live)
            plan = self._planner.plan(service)
            rendered = render_serving(plan)
            self._apply(live, plan, rendered, progress)
            observation = self._observe(plan, rendered)
        except NoctayaError as error:
            self._report_failure(live, error, progress)
            raise
        _log.info(
            "Reconciled LLMService",
            extra={
                "llmservice": f"{namespace}/{name}",
                "runtime": plan.runtime,
                "readyReplicas": observation.ready_replicas,
            },
        )
        self._report_success(live, service, plan, observation)

    # -- apply: the ScaledObject first (nothing else without KEDA), then create-once objects ---

    def _apply(
        self, owner: KubeObject, plan: ServingPlan, rendered: RenderedService, progress: _Progress
    ) -> None:
        svc = plan.service
        uid = owner["metadata"]["uid"]
        applier = self._applier

        def apply(reason: str, obj: KubeObject) -> None:
            api_step(reason, lambda: applier.apply(obj, owner, reason))

        def create_once(reason: str, obj: KubeObject) -> KubeObject:
            return api_step(reason, lambda: applier.create_once(obj, owner, reason))

        def delete(reason: str, kind: ResourceKind, name: str) -> None:
            api_step(reason, lambda: applier.delete_if_controlled(kind, svc.namespace, name, uid))

        try:
            applier.apply(rendered.scaled_object, owner, "ApplyScaledObject")
        except KindNotServed as missing:
            raise NoctayaError(
                "AutoscalingUnavailable", AUTOSCALING_UNAVAILABLE_PREFIX + str(missing)
            ) from missing
        except ApiException as error:
            if api_status(error) == 404:
                raise NoctayaError(
                    "AutoscalingUnavailable", AUTOSCALING_UNAVAILABLE_PREFIX + api_message(error)
                ) from error
            raise NoctayaError("ApplyScaledObject", api_message(error)) from error
        progress.autoscaling_applied = True

        if rendered.demand_secret is not None:
            _check_demand_secret(create_once("ApplyDemandAuthentication", rendered.demand_secret))
        if rendered.cache_pvc is not None:
            create_once("ApplyCachePVC", rendered.cache_pvc)
        if rendered.prewarm_job is not None:
            create_once("ApplyPrewarmJob", rendered.prewarm_job)
        apply("ApplyDeployment", rendered.deployment)
        apply("ApplyBackendService", rendered.backend_service)
        apply("ApplyGateway", rendered.gateway_deployment)
        apply("ApplyGatewayService", rendered.gateway_service)
        if rendered.gateway_pdb is not None:
            apply("ApplyGatewayPodDisruptionBudget", rendered.gateway_pdb)
        else:
            delete("DeleteGatewayPodDisruptionBudget", kinds.PDB, svc.gateway)
        if rendered.aggregator is not None:
            apply("ApplyGatewayScaler", rendered.aggregator)
        apply("ApplyGatewayScalerService", rendered.scaler_service)
        if rendered.aggregator is None:
            delete("DeleteGatewayScaler", kinds.DEPLOYMENT, svc.scaler)
            delete("DeleteDemandAuthentication", kinds.SECRET, svc.demand_secret)

    # -- observe ------------------------------------------------------------------------------

    def _observe(self, plan: ServingPlan, rendered: RenderedService) -> BackendObservation:
        svc = plan.service
        if rendered.prewarm_job is not None:
            job = api_step(
                "ObservePrewarmJob",
                lambda: self._reader.get(kinds.JOB, svc.namespace, svc.prewarm_job),
            )
            _check_prewarm_job(svc.prewarm_job, job)
        deployment = api_step(
            "ObserveBackendDeployment",
            lambda: self._reader.get(kinds.DEPLOYMENT, svc.namespace, svc.name),
        )
        pods = api_step(
            "ObserveBackendPods",
            lambda: self._reader.list(
                kinds.POD, svc.namespace, backend_pod_selector(svc, plan.runtime)
            ),
        )
        return observe(deployment or {}, pods)

    # -- status -------------------------------------------------------------------------------

    def _report_success(
        self,
        live: KubeObject,
        service: LLMService,
        plan: ServingPlan,
        observation: BackendObservation,
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
        event = decide_event(previous.conditions, status.conditions)
        if event is not None:
            if event.type == "Warning":
                _log.info(
                    "Observed backend activation failure", extra={"failureClass": event.reason}
                )
            else:
                _log.info("Observed backend activation recovery")
            self._events.record(obj, event)

    def _report_failure(self, live: KubeObject, error: NoctayaError, progress: _Progress) -> None:
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
                    autoscaling_applied=progress.autoscaling_applied,
                    now=now,
                ),
            )
        except ApiException as write_error:
            _log.warning("could not write failure status: %s", api_message(write_error))


def _check_demand_secret(secret: KubeObject) -> None:
    name = secret["metadata"]["name"]
    encoded = (secret.get("data") or {}).get("token")
    if encoded is None:
        raise NoctayaError(
            "DemandAuthentication", f'demand authentication Secret {name} is missing key "token"'
        )
    try:
        token = base64.b64decode(encoded).decode().strip()
    except ValueError:
        token = ""
    if len(token) < _MIN_DEMAND_TOKEN:
        raise NoctayaError(
            "DemandAuthentication",
            f"demand authentication Secret {name} is invalid: demand authentication token "
            "must contain at least 32 characters",
        )


def _check_prewarm_job(name: str, job: KubeObject | None) -> None:
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            raise NoctayaError(
                "PrewarmFailed", f"prewarm Job {name} failed: {condition.get('message', '')}"
            )
