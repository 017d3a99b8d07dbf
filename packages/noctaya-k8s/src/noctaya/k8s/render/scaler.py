"""Where KEDA's External Push scaler lives, and the Service through which KEDA reaches it.

One gateway serves gRPC itself; several gateways report to one aggregate scaler Deployment,
authenticated with a generated demand token Secret.
"""

from __future__ import annotations

import base64
import secrets

from noctaya.core.plan.gateway import GatewayPlan
from noctaya.core.plan.identity import AGGREGATOR_PORT, GRPC_PORT, ServiceIdentity
from noctaya.k8s.render import gateway_env as ge
from noctaya.k8s.render.endpoint_access import endpoint_access_volume
from noctaya.k8s.render.gateway import hardened_pod
from noctaya.k8s.render.labels import (
    gateway_selector_labels,
    gateway_service_labels,
    scaler_selector_labels,
    selector_labels,
)
from noctaya.k8s.render.objects import RESTRICTED_CONTAINER_SECURITY, Obj, http_probe, new_object


def render_scaler_service(svc: ServiceIdentity, plan: GatewayPlan) -> Obj:
    ports: list[Obj] = [
        {"name": "grpc", "port": GRPC_PORT, "targetPort": GRPC_PORT, "protocol": "TCP"}
    ]
    if plan.aggregated:
        selector = scaler_selector_labels(svc)
        ports.append(
            {
                "name": "http",
                "port": AGGREGATOR_PORT,
                "targetPort": AGGREGATOR_PORT,
                "protocol": "TCP",
            }
        )
    else:
        selector = gateway_selector_labels(svc)
    obj = new_object("v1", "Service", svc.scaler, svc.namespace, gateway_service_labels(svc))
    obj["spec"] = {"type": "ClusterIP", "selector": selector, "ports": ports}
    return obj


def render_aggregator_deployment(
    svc: ServiceIdentity, plan: GatewayPlan, endpoint_access: bool
) -> Obj:
    """The aggregator runs as the service's endpoint reader only to scale on KV-cache use: only
    then does it read the backend's pods; it takes the gateways' word for their demand."""
    labels = scaler_selector_labels(svc)
    reads_pods = endpoint_access and plan.kv_cache is not None
    volumes, mounts = ge.demand_auth_volume(svc)
    tls_volumes, tls_mounts = ge.scaler_tls_volume(plan)
    volumes += tls_volumes
    mounts += tls_mounts
    if reads_pods:
        access_volumes, access_mounts = endpoint_access_volume()
        volumes += access_volumes
        mounts += access_mounts
    container: Obj = {
        "name": "scaler",
        "image": plan.image,
        "args": ["--mode=aggregator"],
        "env": ge.aggregator_env(svc, plan, reads_pods),
        "ports": [
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "http", "containerPort": AGGREGATOR_PORT, "protocol": "TCP"},
        ],
        "readinessProbe": http_probe("/readyz", AGGREGATOR_PORT),
        "livenessProbe": http_probe("/readyz", AGGREGATOR_PORT),
        "securityContext": RESTRICTED_CONTAINER_SECURITY,
        "volumeMounts": mounts,
    }
    obj = new_object("apps/v1", "Deployment", svc.scaler, svc.namespace, labels)
    obj["spec"] = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": hardened_pod(
                plan, [container], volumes, svc.endpoint_reader if reads_pods else None
            ),
        },
    }
    return obj


def new_demand_token() -> str:
    """43 characters of base64url: 32 random bytes, the aggregator's minimum is 32 characters."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def render_demand_secret(svc: ServiceIdentity, token: str) -> Obj:
    obj = new_object("v1", "Secret", svc.demand_secret, svc.namespace, selector_labels(svc))
    obj["type"] = "Opaque"
    obj["data"] = {"token": base64.b64encode(token.encode()).decode()}
    return obj
