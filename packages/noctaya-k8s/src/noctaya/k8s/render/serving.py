"""Every object of one serving plan, rendered before anything is applied."""

from __future__ import annotations

from dataclasses import dataclass

from noctaya.core.plan.serving import ServingPlan
from noctaya.k8s.render.backend import render_backend_deployment, render_backend_service
from noctaya.k8s.render.cache import render_cache_pvc, render_prewarm_job
from noctaya.k8s.render.endpoint_access import render_endpoint_access
from noctaya.k8s.render.gateway import (
    render_gateway_deployment,
    render_gateway_pdb,
    render_gateway_service,
)
from noctaya.k8s.render.objects import Obj
from noctaya.k8s.render.scaledobject import render_scaled_object
from noctaya.k8s.render.scaler import (
    new_demand_token,
    render_aggregator_deployment,
    render_demand_secret,
    render_scaler_service,
)


@dataclass(frozen=True)
class RenderedService:
    scaled_object: Obj
    deployment: Obj
    backend_service: Obj
    endpoint_access: tuple[Obj, Obj, Obj]
    """The endpoint reader's ServiceAccount, Role and RoleBinding, which the gateway runs as
    when rendered `endpoint_access`."""
    gateway_deployment: Obj
    gateway_service: Obj
    gateway_pdb: Obj | None
    aggregator: Obj | None
    scaler_service: Obj
    cache_pvc: Obj | None
    prewarm_job: Obj | None
    demand_secret: Obj | None
    """Created once with a fresh token; an existing owned Secret is reused, never rotated."""


def render_serving(plan: ServingPlan, *, endpoint_access: bool = True) -> RenderedService:
    """`endpoint_access=False`: the gateway tier as it runs where its endpoint reader cannot be
    created, sending to the backend Service."""
    svc, gateway = plan.service, plan.gateway
    return RenderedService(
        scaled_object=render_scaled_object(svc, plan.autoscaling),
        deployment=render_backend_deployment(
            svc, plan.backend, plan.prewarm if plan.cache.fetched_on_each_node else None
        ),
        backend_service=render_backend_service(svc, plan.backend),
        endpoint_access=render_endpoint_access(svc),
        gateway_deployment=render_gateway_deployment(svc, gateway, endpoint_access),
        gateway_service=render_gateway_service(svc),
        gateway_pdb=render_gateway_pdb(svc) if gateway.aggregated else None,
        aggregator=(
            render_aggregator_deployment(svc, gateway, endpoint_access)
            if gateway.aggregated
            else None
        ),
        scaler_service=render_scaler_service(svc, gateway),
        cache_pvc=render_cache_pvc(plan),
        prewarm_job=render_prewarm_job(plan),
        demand_secret=(
            render_demand_secret(svc, new_demand_token()) if gateway.aggregated else None
        ),
    )
