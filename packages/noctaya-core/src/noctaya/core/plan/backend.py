"""The serving backend Deployment: one vLLM container, whole devices, model and cache
volumes, probes and drain — everything from the runtime profile and the service, vendor-neutral.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from noctaya.core.api import InferenceRuntime, LLMService, Probe
from noctaya.core.cache_planning import CACHE_MOUNT_PATH
from noctaya.core.errors import NoctayaError
from noctaya.core.model_source import (
    MODEL_STORE_PATH,
    LiteralEnv,
    ResolvedModel,
    SecretEnv,
)
from noctaya.core.ports import VendorAdapter
from noctaya.core.templating import TemplateContext, render_args, render_env_values
from noctaya.core.vendors import AcceleratorRequest, HostMount

REASON = "Render"
DRAIN_GRACE_SECONDS = 10
HEALTH_PATH = "/health"


@dataclass(frozen=True, slots=True)
class Volume:
    """A pod volume: `kind` is `emptyDir` (memory), `pvc`, or `hostPath`."""

    name: str
    kind: str
    source: str = ""
    """Claim name for `pvc`, host path for `hostPath`."""
    read_only: bool = False
    host_path_type: str | None = None


@dataclass(frozen=True, slots=True)
class Mount:
    volume: str
    path: str
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Scheduling:
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    scheduler_name: str | None = None
    volcano_queue: str | None = None


@dataclass(frozen=True, slots=True)
class BackendPlan:
    runtime: str
    image: str
    args: tuple[str, ...]
    env: tuple[dict[str, Any], ...]
    """Wire-form EnvVars: runtime env (templated), then model env and token, then cache env."""
    port_name: str
    port: int
    cpu: str | None
    memory: str | None
    limits: Mapping[str, int]
    readiness: dict[str, Any]
    startup: dict[str, Any]
    liveness: dict[str, Any] | None
    volumes: tuple[Volume, ...]
    mounts: tuple[Mount, ...]
    prestop_sleep_seconds: int | None
    termination_grace_seconds: int | None
    scheduling: Scheduling
    image_pull_secrets: tuple[str, ...]
    wait_for_marker: str | None = None
    """The file the `wait-for-prewarm` init container waits for, when a Job fills the cache."""


def scheduling_of(runtime: InferenceRuntime) -> Scheduling:
    accelerator = runtime.spec.accelerator
    scheduler = accelerator.scheduler
    queue = scheduler.queue if scheduler else None
    if queue and (scheduler is None or scheduler.name != "volcano"):
        raise NoctayaError(
            REASON,
            f"runtime {json.dumps(runtime.metadata.name)} sets accelerator.scheduler.queue "
            "without scheduler.name=volcano",
        )
    return Scheduling(
        node_selector=dict(accelerator.node_selector),
        tolerations=tuple(server_form(t.to_wire()) for t in accelerator.tolerations),
        scheduler_name=scheduler.name if scheduler and scheduler.name else None,
        volcano_queue=queue or None,
    )


_PROBE_DEFAULTED = frozenset(
    {
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    }
)


def server_form(value: Any) -> Any:
    """The wire form the API server stores: empty strings and lists are dropped.

    Rendering what the server keeps (rather than what a user spelled) lets the operator see
    that a live object already matches, so an unchanged service causes no write.
    """
    if isinstance(value, dict):
        return {k: server_form(v) for k, v in value.items() if v != "" and v != []}
    if isinstance(value, list):
        return [server_form(v) for v in value]
    return value


def _probe(probe: Probe | None, default: dict[str, Any]) -> dict[str, Any]:
    """A runtime probe; a zero timing field means "the default" to Kubernetes, so it is left out."""
    if probe is None:
        return default
    wire: dict[str, Any] = server_form(probe.to_wire())
    return {k: v for k, v in wire.items() if not (k in _PROBE_DEFAULTED and v == 0)}


def _env(pairs: tuple[LiteralEnv, ...]) -> list[dict[str, Any]]:
    return [{"name": item.name, "value": item.value} for item in pairs]


def _last_wins(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per name, the last: the service's own settings (its token, the cache homes)
    override a runtime's, and server-side apply refuses a container with a name twice."""
    last = {item["name"]: index for index, item in enumerate(env)}
    return [item for index, item in enumerate(env) if last[item["name"]] == index]


def secret_env(item: SecretEnv | None) -> list[dict[str, Any]]:
    """The wire-form EnvVar of a Secret-held value, or nothing."""
    if item is None:
        return []
    reference = {"name": item.secret_name, "key": item.key}
    return [{"name": item.name, "valueFrom": {"secretKeyRef": reference}}]


def plan_backend(
    service: LLMService,
    runtime: InferenceRuntime,
    adapter: VendorAdapter,
    model: ResolvedModel,
    *,
    cache_volume: Volume | None,
    cache_env: tuple[LiteralEnv, ...],
    wait_for_marker: str | None,
) -> BackendPlan:
    spec, rt = service.spec, runtime.spec
    rt_name = runtime.metadata.name or ""
    if spec.resources.fraction is not None:
        raise NoctayaError(
            REASON,
            f"resources.fraction is not supported in v0; runtime {json.dumps(rt_name)} serves "
            "whole devices, set resources.accelerators instead",
        )
    sharing = rt.accelerator.sharing
    if sharing is not None and sharing.supported:
        raise NoctayaError(
            REASON,
            f"runtime {json.dumps(rt_name)} sets accelerator.sharing.supported, which is not "
            "implemented; Noctaya serves whole devices, set it to false",
        )
    accelerator = adapter.accelerator_plan(
        AcceleratorRequest(rt_name, rt.accelerator.resource_name, spec.resources.accelerators)
    )
    scheduling = scheduling_of(runtime)
    context = TemplateContext(
        model_path=model.path,
        service_name=service.metadata.name or "",
        service_namespace=service.metadata.namespace or "",
    )
    args = render_args(rt.container.args, spec.runtime.args_override, context)
    values = render_env_values([item.value for item in rt.container.env], context)
    env = [
        server_form({**item.to_wire(), **({"value": value} if value is not None else {})})
        for item, value in zip(rt.container.env, values, strict=True)
    ]
    env = _last_wins([*env, *_env(model.env), *secret_env(model.token_env), *_env(cache_env)])

    volumes = [Volume("dshm", "emptyDir", "Memory")]
    mounts = [Mount("dshm", "/dev/shm")]
    if model.pvc_claim:
        volumes.append(Volume("model-store", "pvc", model.pvc_claim, read_only=True))
        mounts.append(Mount("model-store", MODEL_STORE_PATH, read_only=True))
    volumes += [_host_volume(m) for m in accelerator.host_mounts]
    mounts += [Mount(m.name, m.mount_path, m.read_only) for m in accelerator.host_mounts]
    if cache_volume is not None:
        volumes.append(cache_volume)
        mounts.append(Mount(cache_volume.name, CACHE_MOUNT_PATH, cache_volume.read_only))

    grace = rt.lifecycle.termination_grace_period_seconds
    prestop = None
    drain = spec.scaling.drain_timeout
    if rt.lifecycle.pre_stop_drain and drain.nanoseconds > 0:
        prestop = drain.ceil_seconds()
        grace = max(grace or 0, prestop + DRAIN_GRACE_SECONDS)

    port_name = rt.container.port.name
    health = {"httpGet": {"path": HEALTH_PATH, "port": port_name}}
    return BackendPlan(
        runtime=rt_name,
        image=rt.container.image,
        args=args,
        env=tuple(env),
        port_name=port_name,
        port=rt.container.port.container_port,
        cpu=str(spec.resources.cpu) if spec.resources.cpu is not None else None,
        memory=str(spec.resources.memory) if spec.resources.memory is not None else None,
        limits=dict(accelerator.limits),
        readiness=_probe(rt.health.readiness, health),
        startup=_probe(rt.health.startup, {**health, "periodSeconds": 10, "failureThreshold": 60}),
        liveness=_probe(rt.health.liveness, {}) or None,
        volumes=tuple(volumes),
        mounts=tuple(mounts),
        prestop_sleep_seconds=prestop,
        termination_grace_seconds=grace,
        scheduling=scheduling,
        image_pull_secrets=tuple(ref.name for ref in spec.image_pull_secrets if ref.name),
        wait_for_marker=wait_for_marker,
    )


def _host_volume(mount: HostMount) -> Volume:
    return Volume(mount.name, "hostPath", mount.host_path)
