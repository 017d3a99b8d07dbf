"""The core's `WorkloadOrchestrator` on a cluster: a plan rendered to objects, written in order,
and the serving path observed.

Every object is rendered before the first write, so a plan that cannot be rendered changes
nothing. The ScaledObject is written first: without it KEDA would never scale the backend up,
so a service whose ScaledObject cannot be applied gets no other object. Create-once objects
(demand Secret, cache PVC, prewarm Job) come next, then the applied ones. A `NodeLocalPVC`
claim whose node is gone is given up first (`noctaya.k8s.lost_cache`), and a prewarm Job that
filled another claim than the one now there is replaced: a backend waiting for its marker on
the new, empty claim would wait forever. The gateway's endpoint reader goes before the gateway
tier that runs as it; where the operator may not write it, the gateway tier is rendered
without it and the refusal is reported (`noctaya.k8s.endpoint_access`).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException
from noctaya.core.cache_planning import NODE_LOCAL_PVC
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import (
    POD_SECURITY_REJECTED,
    ServiceObservation,
    pod_security_rejection,
)
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.pod_security import RESTRICTED, PodSecurity
from noctaya.core.plan.serving import ServingPlan
from noctaya.core.ports import FailedAfterAutoscaling
from noctaya.k8s import kinds
from noctaya.k8s.apply import Applier
from noctaya.k8s.endpoint_access import apply_endpoint_access, with_refusal
from noctaya.k8s.lost_cache import LostCacheNodes
from noctaya.k8s.observe import (
    job_failure,
    job_pod_security_rejection,
    job_pod_selector,
    observe_service,
    termination_message,
)
from noctaya.k8s.planning import api_message, api_step
from noctaya.k8s.prewarm_identity import filled_another_claim, filling
from noctaya.k8s.reader import KubeObject, Reader
from noctaya.k8s.render.cache import PREWARM_CONTAINER
from noctaya.k8s.render.labels import backend_pod_selector, gateway_pod_selector
from noctaya.k8s.render.serving import RenderedService, render_serving
from noctaya.k8s.runtime.resources import KindNotServed, ResourceKind, api_status

AUTOSCALING_UNAVAILABLE_PREFIX = (
    "KEDA ScaledObject CRD is required before deploying an LLMService: "
)
_MIN_DEMAND_TOKEN = 32
_PREWARM_REJECTED = "Pod Security admission rejects the pods of prewarm Job {job}: {{detail}}"


class ClusterWorkloads:
    """The objects of every LLMService, each owned by its service and garbage-collected with it.

    The owner is the LLMService the plan is for, as `reader` sees it when the plan is applied:
    in the operator, the watch cache the reconcile read it from, so finding it sends no request.
    """

    def __init__(self, applier: Applier, reader: Reader, lost_cache_nodes: LostCacheNodes) -> None:
        self._applier = applier
        self._reader = reader
        self._lost_cache_nodes = lost_cache_nodes
        self._endpoint_refusals: dict[ServiceIdentity, str] = {}
        """Why a service's gateway runs without its endpoint reader, from its last apply to
        its observation. A service is reconciled by one worker at a time."""

    def apply(self, plan: ServingPlan) -> None:
        rendered = render_serving(plan)
        svc = plan.service
        owner = self._reader.get(kinds.LLMSERVICE, svc.namespace, svc.name)
        if owner is None:  # deleted since it was planned: its removal follows
            return
        self._apply_scaled_object(rendered.scaled_object, owner)
        try:
            self._apply_serving_path(plan, rendered, owner)
        except NoctayaError as error:
            raise FailedAfterAutoscaling(error.reason, error.message) from error

    def _apply_scaled_object(self, scaled_object: KubeObject, owner: KubeObject) -> None:
        try:
            self._applier.apply(scaled_object, owner, "ApplyScaledObject")
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

    def _apply_serving_path(
        self, plan: ServingPlan, rendered: RenderedService, owner: KubeObject
    ) -> None:
        svc, applier, uid = plan.service, self._applier, owner["metadata"]["uid"]

        def apply(reason: str, obj: KubeObject) -> None:
            api_step(reason, lambda: applier.apply(obj, owner, reason))

        def create_once(reason: str, obj: KubeObject) -> KubeObject:
            return api_step(reason, lambda: applier.create_once(obj, owner, reason))

        def delete(reason: str, kind: ResourceKind, name: str) -> None:
            api_step(reason, lambda: applier.delete_if_controlled(kind, svc.namespace, name, uid))

        if rendered.demand_secret is not None:
            _check_demand_secret(create_once("ApplyDemandAuthentication", rendered.demand_secret))
        if plan.cache.strategy == NODE_LOCAL_PVC:
            self._lost_cache_nodes.give_up_if_lost(plan, owner)
        claim = None
        if rendered.cache_pvc is not None:
            claim = create_once("ApplyCachePVC", rendered.cache_pvc)
        if rendered.prewarm_job is not None and not _being_deleted(claim):
            job = create_once("ApplyPrewarmJob", filling(rendered.prewarm_job, claim))
            if filled_another_claim(job, claim):  # its deletion wakes the service to create it
                delete("ApplyPrewarmJob", kinds.JOB, svc.prewarm_job)
        apply("ApplyDeployment", rendered.deployment)
        apply("ApplyBackendService", rendered.backend_service)
        refusal = apply_endpoint_access(
            applier,
            svc,
            rendered.endpoint_access,
            owner,
            kv_cache=plan.gateway.kv_cache is not None,
        )
        if refusal is None:
            self._endpoint_refusals.pop(svc, None)
        else:
            self._endpoint_refusals[svc] = refusal
            rendered = render_serving(plan, endpoint_access=False)
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

    def remove(self, service: ServiceIdentity) -> None:
        """Nothing to send: every object carries its service as controller owner (`Applier`), so
        the garbage collector removes them once the service is gone."""
        self._endpoint_refusals.pop(service, None)

    def observe(self, plan: ServingPlan) -> ServiceObservation:
        svc, reader = plan.service, self._reader
        job = None
        if plan.prewarm is not None:
            job = api_step(
                "ObservePrewarmJob", lambda: reader.get(kinds.JOB, svc.namespace, svc.prewarm_job)
            )
        events = api_step("ObservePodEvents", lambda: reader.list(kinds.EVENT, svc.namespace, ""))
        if plan.prewarm is not None:

            def job_pods() -> list[KubeObject]:
                selector = job_pod_selector(svc.prewarm_job)
                return api_step(
                    "ObservePrewarmJob", lambda: reader.list(kinds.POD, svc.namespace, selector)
                )

            _check_prewarm_job(svc.prewarm_job, job, events, plan.prewarm.pod_security, job_pods)
        observation = observe_service(
            backend=api_step(
                "ObserveBackendDeployment",
                lambda: reader.get(kinds.DEPLOYMENT, svc.namespace, svc.name),
            ),
            backend_pods=api_step(
                "ObserveBackendPods",
                lambda: reader.list(
                    kinds.POD, svc.namespace, backend_pod_selector(svc, plan.runtime)
                ),
            ),
            gateway=api_step(
                "ObserveGatewayDeployment",
                lambda: reader.get(kinds.DEPLOYMENT, svc.namespace, svc.gateway),
            ),
            gateway_pods=api_step(
                "ObserveGatewayPods",
                lambda: reader.list(kinds.POD, svc.namespace, gateway_pod_selector(svc)),
            ),
            events=events,
            scaled_object=api_step(
                "ObserveScaledObject",
                lambda: reader.get(kinds.SCALED_OBJECT, svc.namespace, svc.name),
            ),
            backend_security=plan.backend.pod_security,
            gateway_security=RESTRICTED,
        )
        gateway = with_refusal(observation.gateway, self._endpoint_refusals.get(svc))
        return dataclasses.replace(observation, gateway=gateway)


def _being_deleted(claim: KubeObject | None) -> bool:
    """A claim on its way out: a prewarm Job created now would fill what no backend will read,
    and be replaced once the new claim is there."""
    return claim is not None and bool(claim["metadata"].get("deletionTimestamp"))


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


def _check_prewarm_job(
    name: str,
    job: KubeObject | None,
    events: list[KubeObject],
    security: PodSecurity,
    pods: Callable[[], list[KubeObject]],
) -> None:
    """A failed Job, with the fetcher's own last line (its pod's termination message, read only
    then); or a Job whose pods the namespace's Pod Security admission refuses."""
    failure = job_failure(job)
    if failure is not None:
        said = termination_message(pods(), PREWARM_CONTAINER)
        raise NoctayaError(
            "PrewarmFailed", f"prewarm Job {name} failed: {failure}" + (f"; {said}" if said else "")
        )
    refusal = job_pod_security_rejection(job, events) if job is not None else None
    if refusal is not None:
        raise NoctayaError(
            POD_SECURITY_REJECTED,
            pod_security_rejection(_PREWARM_REJECTED.format(job=name), refusal, security),
        )
