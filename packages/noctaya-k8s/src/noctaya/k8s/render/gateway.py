"""The always-on gateway tier: Deployment, public Service, and a PDB when there are several."""

from __future__ import annotations

from noctaya.core.api.llmservice import GatewayResources
from noctaya.core.plan.gateway import GatewayPlan
from noctaya.core.plan.identity import GRPC_PORT, ServiceIdentity
from noctaya.k8s.render import gateway_env as ge
from noctaya.k8s.render.backend import apply_scheduling
from noctaya.k8s.render.endpoint_access import endpoint_access_volume
from noctaya.k8s.render.labels import gateway_selector_labels, gateway_service_labels
from noctaya.k8s.render.objects import (
    RESTRICTED_CONTAINER_SECURITY,
    RESTRICTED_POD_SECURITY,
    Obj,
    http_probe,
    new_object,
    set_image_pull_secrets,
)


def hardened_pod(
    plan: GatewayPlan, containers: list[Obj], volumes: list[Obj], account: str | None
) -> Obj:
    """The pod shape gateway and aggregator share: non-root, 30 s to drain, placed where the
    platform's gateway defaults say. No token is automounted: a pod that runs as `account`
    gets its token projected where its container asked (`endpoint_access_volume`)."""
    pod: Obj = {
        "terminationGracePeriodSeconds": 30,
        "automountServiceAccountToken": False,
        "securityContext": RESTRICTED_POD_SECURITY,
        "containers": containers,
    }
    if account is not None:
        pod["serviceAccountName"] = account
    set_image_pull_secrets(pod, plan.image_pull_secrets)
    apply_scheduling(pod, plan.scheduling)
    if volumes:
        pod["volumes"] = volumes
    return pod


def _resources(resources: GatewayResources | None) -> Obj:
    result: Obj = {}
    if resources is None:
        return result
    for section in ("requests", "limits"):
        amounts = getattr(resources, section)
        if amounts is None:
            continue
        values = {k: str(v) for k, v in (("cpu", amounts.cpu), ("memory", amounts.memory)) if v}
        if values:
            result[section] = values
    return result


def render_gateway_deployment(
    svc: ServiceIdentity, plan: GatewayPlan, endpoint_access: bool
) -> Obj:
    """`endpoint_access`: the gateway runs as the service's endpoint reader and follows the
    backend's EndpointSlices; without it, it sends to the backend Service."""
    labels = gateway_selector_labels(svc)
    volumes, mounts = ge.client_auth_volume(plan)
    ports: list[Obj] = [{"name": "http", "containerPort": ge.HTTP_PORT, "protocol": "TCP"}]
    if plan.aggregated:
        extra_volumes, extra_mounts = ge.demand_auth_volume(svc)
    else:
        ports.append({"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"})
        extra_volumes, extra_mounts = ge.scaler_tls_volume(plan)
    volumes += extra_volumes
    mounts += extra_mounts
    if endpoint_access:
        access_volumes, access_mounts = endpoint_access_volume()
        volumes += access_volumes
        mounts += access_mounts
    container: Obj = {
        "name": "gateway",
        "image": plan.image,
        "env": ge.gateway_env(svc, plan, endpoint_access),
        "ports": ports,
        "readinessProbe": http_probe("/healthz", ge.HTTP_PORT),
        "livenessProbe": http_probe("/healthz", ge.HTTP_PORT),
        "resources": _resources(plan.resources),
        "securityContext": RESTRICTED_CONTAINER_SECURITY,
    }
    if mounts:
        container["volumeMounts"] = mounts
    pod = hardened_pod(plan, [container], volumes, svc.endpoint_reader if endpoint_access else None)
    if plan.aggregated:
        pod["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": labels},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    obj = new_object("apps/v1", "Deployment", svc.gateway, svc.namespace, labels)
    obj["spec"] = {
        "replicas": plan.replicas,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }
    return obj


def render_gateway_service(svc: ServiceIdentity) -> Obj:
    obj = new_object("v1", "Service", svc.name, svc.namespace, gateway_service_labels(svc))
    obj["spec"] = {
        "selector": gateway_selector_labels(svc),
        "ports": [{"name": "http", "port": 80, "targetPort": ge.HTTP_PORT, "protocol": "TCP"}],
    }
    return obj


def render_gateway_pdb(svc: ServiceIdentity) -> Obj:
    obj = new_object(
        "policy/v1", "PodDisruptionBudget", svc.gateway, svc.namespace, gateway_service_labels(svc)
    )
    obj["spec"] = {"minAvailable": 1, "selector": {"matchLabels": gateway_selector_labels(svc)}}
    return obj
