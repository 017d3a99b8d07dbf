"""May the gateway follow its backend's pods? Its endpoint reader applied, or the platform's
refusal, which the gateway tier then reports.

A platform may withhold from the operator the RBAC to create ServiceAccounts, Roles or
RoleBindings. The service still serves: its gateway runs without an account and sends to the
backend Service, so only what needs the pods is lost (routing to a ready pod as it becomes
ready, KV-cache scaling). The refusal does not make the service any less ready; it is reported
as the gateway tier's fault (`REASON`, `Degraded` while the gateway serves), and while the
gateway has no available replica it is added to the tier's message, which `Ready` quotes: the
refusal does not explain why the gateway is not up, so it does not replace what does.
"""

from __future__ import annotations

import dataclasses

from kubernetes.client.exceptions import ApiException
from noctaya.core.errors import NoctayaError
from noctaya.core.observation import TierObservation
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.k8s.apply import Applier
from noctaya.k8s.planning import api_message
from noctaya.k8s.reader import KubeObject
from noctaya.k8s.runtime.resources import api_status

REASON = "GatewayEndpointsForbidden"
_STEP = "ApplyGateway"
_FORBIDDEN = 403


def apply_endpoint_access(
    applier: Applier,
    svc: ServiceIdentity,
    objects: tuple[KubeObject, ...],
    owner: KubeObject,
    *,
    kv_cache: bool,
) -> str | None:
    """Apply the endpoint reader; None once it is in place, else why the gateway cannot have
    it (the first object the API server forbids the operator to write). With `kv_cache` (the
    service scales on kvCacheUtil) the reason also says that the scaler, which reads the
    gauge from the pods as the same account, falls back to queued requests."""
    for obj in objects:
        try:
            applier.apply(obj, owner, _STEP)
        except ApiException as error:
            if api_status(error) != _FORBIDDEN:
                raise NoctayaError(_STEP, api_message(error)) from error
            return _refusal(svc, obj, error, kv_cache)
    return None


def _refusal(svc: ServiceIdentity, obj: KubeObject, error: ApiException, kv_cache: bool) -> str:
    kind, name = obj["kind"], obj["metadata"]["name"]
    scaling = (
        "; scaling.metric kvCacheUtil cannot read the backend pods' KV cache either, so the "
        "backend scales on queued requests (queueDepth) until then"
        if kv_cache
        else ""
    )
    return (
        f'the gateway cannot see the backend pods and sends to Service "{svc.backend_service}": '
        f'the operator may not write {kind} "{name}" ({api_message(error)}){scaling}; grant '
        "the operator the rules of `noctaya rbac` on serviceaccounts, roles and rolebindings, "
        "and get, list and watch on discovery.k8s.io endpointslices"
    )


def with_refusal(gateway: TierObservation, refusal: str | None) -> TierObservation:
    """The gateway tier as the service reports it: its own fault first (it is what keeps it
    from serving), then the refusal."""
    if refusal is None or gateway.degraded:
        return gateway
    if gateway.serving:
        return dataclasses.replace(gateway, reason=REASON, message=refusal, degraded=True)
    return dataclasses.replace(gateway, message=f"{gateway.message}; {refusal}")
