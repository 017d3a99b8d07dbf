"""The whole serving plan of one LLMService.

Its parts are planned in the order their errors are reported: autoscaling, then cache and
backend, gateway, prewarm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from noctaya.core.api import InferenceRuntime, LLMService
from noctaya.core.api.llmservice import ScalingMetric
from noctaya.core.cache_planning import (
    CACHE_VOLUME_NAME,
    CachePlan,
    CacheVolume,
    HostPathCache,
    PrewarmPlan,
    plan_cache,
    plan_prewarm,
)
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import ResolvedModel
from noctaya.core.plan.autoscaling import REASON as AUTOSCALING_REASON
from noctaya.core.plan.autoscaling import AutoscalingPlan, plan_autoscaling
from noctaya.core.plan.backend import BackendPlan, CacheMount, literal_env, plan_backend
from noctaya.core.plan.container import ClaimVolume, HostPathVolume, Volume
from noctaya.core.plan.gateway import GatewayDefaults, GatewayPlan, KvCacheScaling, plan_gateway
from noctaya.core.plan.gateway_env import DEFAULT_BACKEND_READINESS_PATH
from noctaya.core.plan.identity import ServiceIdentity
from noctaya.core.plan.served_models import served_model_names
from noctaya.core.ports import VendorAdapter


@dataclass(frozen=True, slots=True)
class ServingPlan:
    service: ServiceIdentity
    runtime: str
    model: ResolvedModel
    """The model as the backend sees it (`path` is `.Model.Path`)."""
    autoscaling: AutoscalingPlan
    backend: BackendPlan
    gateway: GatewayPlan
    cache: CachePlan
    prewarm: PrewarmPlan | None
    """The `<svc>-prewarm` Job: hub prewarm or OCI staging; it never requests accelerators."""


def cache_volume(volume: CacheVolume, *, read_only: bool) -> Volume:
    """The `model-cache` volume for a cache; a claim is itself marked read-only when `read_only`.

    A host folder has no read-only flag of its own: the read-only `/cache` mount
    (`CacheMount.read_only`) is what keeps the serving container from writing it.
    """
    if isinstance(volume, HostPathCache):
        return HostPathVolume(CACHE_VOLUME_NAME, volume.path, volume.type)
    return ClaimVolume(CACHE_VOLUME_NAME, volume.claim_name, read_only=read_only)


def cache_mount(cache: CachePlan) -> CacheMount | None:
    if cache.volume is None:
        return None
    return CacheMount(
        volume=cache_volume(cache.volume, read_only=cache.serving_read_only),
        read_only=cache.serving_read_only,
        env=literal_env(cache.serving_env),
        ready_marker=cache.readiness_marker,
    )


def gateway_readiness_path(runtime: InferenceRuntime) -> str | None:
    """The path of the runtime's `httpGet` readiness probe, None where the gateway's default is
    the same path (or the probe is no `httpGet`)."""
    declared = runtime.spec.health.readiness
    http_get = declared.http_get if declared is not None else None
    if http_get is None:
        return None
    path = "/" + (http_get.path or "").lstrip("/")
    return None if path == DEFAULT_BACKEND_READINESS_PATH else path


def kv_cache_scaling(service: LLMService, runtime: InferenceRuntime) -> KvCacheScaling | None:
    """Where the gateway reads each pod's KV-cache gauge, for a service that scales on it.

    Refused with the autoscaling decision's reason, so nothing is applied: without the gauge
    KEDA would have nothing to scale on beyond the first replica.
    """
    if service.spec.scaling.metric is not ScalingMetric.KV_CACHE_UTIL:
        return None
    name = json.dumps(runtime.metadata.name or "")
    metrics = runtime.spec.metrics
    if metrics is None or not metrics.kv_cache_util:
        raise NoctayaError(
            AUTOSCALING_REASON,
            "scaling.metric kvCacheUtil needs the runtime's spec.metrics.kvCacheUtil; "
            f"InferenceRuntime {name} names no KV-cache gauge",
        )
    port = runtime.spec.container.port
    if metrics.port.isdigit() and 1 <= int(metrics.port) <= 65535:
        number = int(metrics.port)
    elif metrics.port == port.name:
        number = port.container_port
    else:
        raise NoctayaError(
            AUTOSCALING_REASON,
            f"scaling.metric kvCacheUtil reads the runtime's spec.metrics.port "
            f"{json.dumps(metrics.port)}, which is neither a port number nor the name of "
            f"InferenceRuntime {name}'s container port ({json.dumps(port.name)})",
        )
    return KvCacheScaling(metric=metrics.kv_cache_util, port=number, path=metrics.path)


def plan_serving(
    service: LLMService,
    runtime: InferenceRuntime,
    adapter: VendorAdapter,
    model: ResolvedModel,
    *,
    gateway_image: str,
    gateway_replicas: int,
    fetch_image: str | None = None,
    gateway_defaults: GatewayDefaults | None = None,
    plain_http_registries: frozenset[str] = frozenset(),
) -> ServingPlan:
    """`fetch_image` runs the prewarm / staging Job; by default the gateway's (the main) image.
    The Job reaches the registries of `plain_http_registries` over plain HTTP."""
    identity = ServiceIdentity(service.metadata.name or "", service.metadata.namespace or "")
    spec = service.spec
    autoscaling = plan_autoscaling(spec)
    kv_cache = kv_cache_scaling(service, runtime)
    requested = spec.cache
    cache = plan_cache(
        strategy=requested.strategy.value,
        size=requested.size,
        storage_class_name=requested.storage_class_name,
        prewarm=requested.prewarm,
        model=model,
        service_name=identity.name,
        namespace=identity.namespace,
    )
    backend = plan_backend(service, runtime, adapter, model, cache=cache_mount(cache))
    gateway = plan_gateway(
        spec,
        gateway_image,
        gateway_replicas,
        autoscaling.scaler_tls_secret,
        gateway_defaults,
        served_model_names(backend.args, model.path),
        gateway_readiness_path(runtime),
        kv_cache,
    )
    return ServingPlan(
        service=identity,
        runtime=backend.runtime,
        model=model,
        autoscaling=autoscaling,
        backend=backend,
        gateway=gateway,
        cache=cache,
        prewarm=plan_prewarm(
            cache,
            model,
            fetch_image or gateway_image,
            backend.env,
            plain_http=model.oci_registry in plain_http_registries,
        ),
    )
